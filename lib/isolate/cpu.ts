/**
 * How much CPU an isolate's processes have had, and whether they want more: what tells a load
 * that runs long because its code spins from one that runs long because the machine is busy.
 * Read from Linux's /proc (the isolate's process, and under bubblewrap its descendants); elsewhere
 * there is nothing to read, and the caller falls back to wall time.
 */
import fs from 'node:fs';

/** USER_HZ: the unit of /proc's CPU times, 100 on every Linux architecture Node runs on. */
const TICKS_PER_SECOND = 100;

export interface TreeUsage {
  /** User and system CPU time of the process and its descendants alive now, in ms. */
  cpuMs: number;
  /** Some process of the tree is running or waiting for a core (R) or for the disk (D). */
  runnable: boolean;
}

/** Usage of `pid` and its descendants; undefined where /proc cannot tell (not Linux, or gone). */
export function treeUsage(pid: number | undefined): TreeUsage | undefined {
  if (pid === undefined || process.platform !== 'linux') return undefined;
  const usage: TreeUsage = { cpuMs: 0, runnable: false };
  const seen = new Set<number>();
  const visit = (each: number): boolean => {
    if (seen.has(each) || seen.size > 256) return true;
    seen.add(each);
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${each}/stat`, 'latin1');
    } catch {
      return false;
    }
    // The command name is in parentheses and may hold spaces: the fields start after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const state = fields[0];
    if (state === 'R' || state === 'D') usage.runnable = true;
    usage.cpuMs += ((Number(fields[11]) || 0) + (Number(fields[12]) || 0)) * (1000 / TICKS_PER_SECOND);
    for (const child of childrenOf(each)) visit(child);
    return true;
  };
  return visit(pid) ? usage : undefined;
}

/** The pids of the children of `pid` (every thread's), from /proc; none where it cannot tell. */
export function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const children: number[] = [];
  for (const task of tasks) {
    try {
      for (const child of fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'latin1').split(' ')) {
        if (child !== '') children.push(Number(child));
      }
    } catch {
      // the task ended meanwhile, or the kernel keeps no children lists
    }
  }
  return children;
}
