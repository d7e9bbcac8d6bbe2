/**
 * The walls around an isolate: the operating system's, not ours. Each isolate's Node runs inside
 * bubblewrap (Debian's `bubblewrap`, the tool Flatpak uses), which builds it a PID namespace (the
 * service and the other isolates invisible: `kill(ppid)` and `kill(-1)` reach nothing), a user
 * namespace where it is `nobody`, and a filesystem of read-only binds: the system's libraries,
 * Node, this package and its dependencies, a private `/tmp`, and one writable folder, the
 * extension's own under `files.dir`. The service's `/proc`, environment, working directory and
 * data are not in it. When the isolate's process ends, the namespace ends, and with it whatever
 * the extension started, detached or not.
 *
 * What bubblewrap cannot say (no child processes), Node's permission model says: it is the
 * isolate's own Node that refuses, whatever the sandbox.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../logger';

/** `sandbox` option: `'auto'` uses bubblewrap where it runs, `'bubblewrap'` requires it, `'none'` runs isolates as plain child processes. */
export type SandboxOption = 'auto' | 'bubblewrap' | 'none';

/** What extension code may do beyond its own folder (`extensionPermissions`). */
export interface ExtensionPermissions {
  /** Reach the network (the host's interfaces). Default true; false leaves it a loopback of its own. */
  network?: boolean;
  /** Start processes (`child_process`). Default true. */
  childProcess?: boolean;
  /** Further paths it may read (bound read-only at the same path). */
  read?: readonly string[];
  /** Further paths it may write (bound read-write at the same path). */
  write?: readonly string[];
}

/** `extensionPermissions`: for every extension, with `byName` overriding per extension name. */
export type ExtensionPermissionsOption = ExtensionPermissions & { byName?: Readonly<Record<string, ExtensionPermissions>> };

/** Permissions as checked and filled in. */
export interface ResolvedPermissions {
  readonly network: boolean;
  readonly childProcess: boolean;
  readonly read: readonly string[];
  readonly write: readonly string[];
}

export interface ResolvedPermissionsOption {
  readonly all: ResolvedPermissions;
  readonly byName: ReadonlyMap<string, ResolvedPermissions>;
}

/** The sandbox this router's isolates run in, and why. */
export interface SandboxChoice {
  /** What the option asked for. */
  readonly requested: SandboxOption;
  /** What runs: bubblewrap, or plain child processes. */
  readonly kind: 'bubblewrap' | 'none';
  /** The bubblewrap executable, when `kind` is `'bubblewrap'`. */
  readonly bwrap?: string;
  /** Why there is none, when `'auto'` found none. */
  readonly unavailable?: string;
}

const PERMISSION_KEYS = ['network', 'childProcess', 'read', 'write'];

function checkPermissions(value: unknown, name: string, base: ResolvedPermissions): ResolvedPermissions {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new TypeError(`option ${name} must be an object`);
  for (const key of Object.keys(value)) {
    if (!PERMISSION_KEYS.includes(key)) throw new TypeError(`unknown option "${name}.${key}" (known: ${PERMISSION_KEYS.map((k) => `${name}.${k}`).join(', ')})`);
  }
  const given = value as ExtensionPermissions;
  const flag = (key: 'network' | 'childProcess'): boolean => {
    const flagValue = given[key] ?? base[key];
    if (typeof flagValue !== 'boolean') throw new TypeError(`option ${name}.${key} must be true or false, got ${JSON.stringify(flagValue)}`);
    return flagValue;
  };
  const paths = (key: 'read' | 'write'): readonly string[] => {
    const list = given[key];
    if (list === undefined) return base[key];
    if (!Array.isArray(list) || list.some((each) => typeof each !== 'string' || !path.isAbsolute(each))) {
      throw new TypeError(`option ${name}.${key} must be an array of absolute paths, got ${JSON.stringify(list)}`);
    }
    return Object.freeze([...list]);
  };
  return Object.freeze({ network: flag('network'), childProcess: flag('childProcess'), read: paths('read'), write: paths('write') });
}

const DEFAULT_PERMISSIONS: ResolvedPermissions = Object.freeze({ network: true, childProcess: true, read: Object.freeze([]), write: Object.freeze([]) });

/** Checks `extensionPermissions`; a name under `byName` takes the defaults of the top level, then its own. */
export function resolvePermissions(option: ExtensionPermissionsOption | undefined): ResolvedPermissionsOption {
  if (option === undefined) return { all: DEFAULT_PERMISSIONS, byName: new Map() };
  if (option === null || typeof option !== 'object' || Array.isArray(option)) throw new TypeError('option extensionPermissions must be an object');
  const { byName, ...own } = option;
  const all = checkPermissions(own, 'extensionPermissions', DEFAULT_PERMISSIONS);
  const named = new Map<string, ResolvedPermissions>();
  if (byName !== undefined) {
    if (byName === null || typeof byName !== 'object' || Array.isArray(byName)) throw new TypeError('option extensionPermissions.byName must be an object of extension names');
    for (const [name, value] of Object.entries(byName)) named.set(name, checkPermissions(value, `extensionPermissions.byName.${name}`, all));
  }
  return { all, byName: named };
}

export function permissionsFor(option: ResolvedPermissionsOption, name: string): ResolvedPermissions {
  return option.byName.get(name) ?? option.all;
}

/** What the probe found, by PATH: asked once per process and PATH. */
const probed = new Map<string, { bwrap: string } | { unavailable: string }>();

/**
 * Whether bubblewrap runs here: found on the PATH, and able to make the namespaces an isolate
 * needs (a container without user namespaces refuses). Asked once per process.
 */
export function probeBubblewrap(env: NodeJS.ProcessEnv = process.env): { bwrap: string } | { unavailable: string } {
  const searchPath = env.PATH ?? '';
  let found = probed.get(searchPath);
  if (found === undefined) {
    found = probe(searchPath);
    probed.set(searchPath, found);
  }
  return found;
}

function probe(searchPath: string): { bwrap: string } | { unavailable: string } {
  if (process.platform !== 'linux') return { unavailable: `bubblewrap runs on Linux only (this is ${process.platform})` };
  const bwrap = findOnPath('bwrap', searchPath);
  if (bwrap === undefined) return { unavailable: 'bubblewrap (bwrap) is not installed: apt-get install bubblewrap' };
  const tried = spawnSync(bwrap, [...NAMESPACES, '--ro-bind', '/', '/', '--proc', '/proc', '--', 'true'], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000, encoding: 'utf8' });
  if (tried.status !== 0) {
    const why = (tried.stderr || tried.error?.message || `exit ${tried.status ?? tried.signal}`).trim().split('\n')[0];
    return { unavailable: `bubblewrap cannot make namespaces here (${why}): user namespaces may be off` };
  }
  return { bwrap };
}

function findOnPath(command: string, searchPath: string): string | undefined {
  for (const dir of searchPath.split(path.delimiter)) {
    if (dir === '') continue;
    const candidate = path.join(dir, command);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Decides the sandbox from the option; `'bubblewrap'` without one throws, naming what to install. */
export function chooseSandbox(requested: SandboxOption): SandboxChoice {
  if (requested === 'none') return { requested, kind: 'none' };
  const probe = probeBubblewrap();
  if ('bwrap' in probe) return { requested, kind: 'bubblewrap', bwrap: probe.bwrap };
  if (requested === 'bubblewrap') throw new Error(`option sandbox: 'bubblewrap' is required, but ${probe.unavailable}`);
  return { requested, kind: 'none', unavailable: probe.unavailable };
}

/** A router's sandbox: what runs, how the deployments list shows it, and why deployments are refused (if they are). */
export interface RouterSandbox {
  choice: SandboxChoice;
  listed: { kind: 'bubblewrap' | 'none'; unavailable?: string };
  refused: string | undefined;
}

/**
 * The sandbox of a router's isolates, from its options: throws where `'bubblewrap'` is required
 * and cannot run, and says at once (in the log) when isolates will run without one.
 */
export function sandboxFor(settings: { sandbox: SandboxOption; production: boolean; logger: Logger }): RouterSandbox {
  const choice = chooseSandbox(settings.sandbox);
  const refused = sandboxRefusal(choice, settings.production);
  warnWithoutSandbox(choice, refused, settings.logger);
  return { choice, listed: { kind: choice.kind, ...(choice.unavailable === undefined ? {} : { unavailable: choice.unavailable }) }, refused };
}

/**
 * Why deployed code may not run here, or undefined: with `NODE_ENV=production`, `'auto'` that found
 * no sandbox refuses it (503 SANDBOX_UNAVAILABLE); `'none'` chosen on purpose runs it.
 */
export function sandboxRefusal(choice: SandboxChoice, production: boolean): string | undefined {
  if (choice.kind !== 'none' || choice.requested === 'none' || !production) return undefined;
  return `NODE_ENV is production and no sandbox runs here (${choice.unavailable}): deployed code is not run. Install bubblewrap, or set sandbox: 'none' to run it unsandboxed on purpose`;
}

/** Says at start what isolates run in, when it is less than the default promises. */
export function warnWithoutSandbox(choice: SandboxChoice, refusal: string | undefined, logger: Logger): void {
  if (refusal !== undefined) logger.error({ sandbox: 'none' }, `bcms-extensions: ${refusal}`);
  else if (choice.kind === 'none' && choice.requested === 'auto') {
    logger.warn(
      { sandbox: 'none', reason: choice.unavailable },
      `bcms-extensions: isolates run without a sandbox (${choice.unavailable}): extension code can read what the service's user can read and signal its processes. Set sandbox: 'none' to silence this`,
    );
  }
}

/** The namespaces of every isolate. The uid and gid are nobody's: not the service's identity. */
const NAMESPACES = ['--unshare-user', '--uid', '65534', '--gid', '65534', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--die-with-parent'];

/**
 * Files of the system an isolate's Node needs: name resolution, TLS roots, and the user database
 * (world-readable; `os.userInfo()` and `os.homedir()` look `nobody` up there). Bound where they exist.
 */
const SYSTEM_FILES = [
  '/etc/passwd',
  '/etc/group',
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/host.conf',
  '/etc/gai.conf',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/pki',
  '/etc/localtime',
];

/** Folders of libraries and programs: bound read-only, or linked as they are here (merged /usr). */
const SYSTEM_DIRS = ['/usr', '/lib', '/lib64', '/lib32', '/libx32', '/bin', '/sbin'];

/** bubblewrap's arguments for the system's folders: bound read-only, or linked as they are here. */
function systemBinds(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(dir);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(dir), dir);
    else args.push('--ro-bind', dir, dir);
  }
  return args;
}

/** Node's warning that the permission model is experimental, silenced: `--disable-warning` came in Node 20.11; before it, every warning. */
const QUIET_PERMISSION_WARNING = (() => {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  return major > 20 || (major === 20 && minor >= 11) ? '--disable-warning=ExperimentalWarning' : '--no-warnings';
})();

/** What an isolate's process is started as. */
export interface IsolateCommand {
  command: string;
  args: string[];
}

/**
 * The command that starts `script` (with `scriptArgs`) in Node, in the sandbox `choice` names.
 * `readable`: the code it runs and what that requires (read-only); `writable`: its own folder,
 * also its working directory.
 */
export function isolateCommand(
  choice: SandboxChoice,
  node: { execArgv: string[]; script: string; scriptArgs: string[] },
  where: { readable: readonly string[]; writable: string; env: Readonly<Record<string, string>> },
  permissions: ResolvedPermissions,
): IsolateCommand {
  const execArgv = [...node.execArgv];
  if (!permissions.childProcess) {
    // Node's permission model: no child_process (nor workers, addons or WASI, which it refuses
    // alongside); the filesystem is left to the sandbox, so reads and writes are allowed here.
    execArgv.push('--experimental-permission', '--allow-fs-read=*', '--allow-fs-write=*', QUIET_PERMISSION_WARNING);
  }
  const nodeArgs = [...execArgv, node.script, ...node.scriptArgs];
  if (choice.kind === 'none') return { command: process.execPath, args: nodeArgs };

  const args = [...NAMESPACES];
  if (!permissions.network) args.push('--unshare-net');
  args.push(...systemBinds());
  for (const file of SYSTEM_FILES) args.push('--ro-bind-try', file, file);
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  // Node itself, where it is not under /usr (nvm, a tarball in /opt).
  args.push('--ro-bind', process.execPath, process.execPath);
  for (const dir of unique([...where.readable, ...permissions.read])) args.push('--ro-bind-try', dir, dir);
  for (const dir of unique(permissions.write)) args.push('--bind-try', dir, dir);
  args.push('--bind', where.writable, where.writable, '--chdir', where.writable);
  // The root bubblewrap builds the mounts on is a tmpfs: read-only too, once they are made.
  args.push('--remount-ro', '/');
  // bubblewrap sets PWD after --chdir; the environment is `extensionEnv` and nothing else.
  const unsetPwd = where.env.PWD === undefined && fs.existsSync('/usr/bin/env') ? ['/usr/bin/env', '-u', 'PWD'] : [];
  args.push('--', ...unsetPwd, process.execPath, ...nodeArgs);
  return { command: choice.bwrap as string, args };
}

function unique(list: readonly string[]): string[] {
  return [...new Set(list)];
}

/**
 * What an isolate reads of this package: its compiled code and manifest, its own dependencies
 * (when installed inside it), and each `node_modules` folder above it, where npm hoists them;
 * never the rest of the package's folder, which in development is the service's working directory.
 * Real paths too, so that a linked install (`npm link`, a workspace) is bound where Node finds it.
 */
export function packageReadables(packageRoot: string): string[] {
  const found = new Set<string>();
  const add = (dir: string): void => {
    if (!fs.existsSync(dir)) return;
    found.add(dir);
    found.add(fs.realpathSync(dir));
  };
  for (const own of ['dist', 'package.json', 'node_modules']) add(path.join(packageRoot, own));
  let dir = packageRoot;
  for (;;) {
    const parent = path.dirname(dir);
    if (parent === dir) break;
    if (path.basename(dir) === 'node_modules') add(dir);
    dir = parent;
  }
  return [...found];
}

/** The folder of the package a module file belongs to (its nearest package.json), for `isolate: 'all'`. */
export function moduleRoot(file: string): string {
  let dir = path.dirname(file);
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return path.dirname(file);
    dir = parent;
  }
}

/**
 * Takes the setuid and setgid marks off what an extension left in its folder, as its isolate ends:
 * inside its sandbox it owns its files as the service's user (mounted nosuid there, but not on the
 * host), so a copy of a program marked setuid would run as the service for whoever reaches it. Done
 * by `find` in a sandbox of its own that holds that folder alone, apart from the service's thread:
 * a file another isolate swaps for a link meanwhile leads nowhere of the host's. Without a sandbox
 * there is nothing to take back (the isolate runs as the service's user anyway).
 */
export function stripSetIdBits(choice: SandboxChoice, folder: string): void {
  if (choice.kind !== 'bubblewrap') return;
  const args = [...NAMESPACES];
  args.push(...systemBinds());
  args.push('--bind', folder, folder, '--', 'find', folder, '-xdev', '-perm', '/6000', '-exec', 'chmod', 'ug-s', '{}', '+');
  try {
    spawn(choice.bwrap as string, args, { stdio: 'ignore' })
      .on('error', () => {})
      .unref();
  } catch {
    // Not started (no process left): the marks stay until its next end.
  }
}
