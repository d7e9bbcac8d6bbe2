/**
 * purple-cheetah's `useFS`, rooted in the service's files directory (option `files.dir`, default
 * `.bcms/files`): whatever path a BCMS plugin builds, its files land there and never outside.
 * A deployed extension's isolate runs in its own folder of it (`<files.dir>/<plugin>`), which is
 * also its `process.cwd()`, so the paths BCMS plugins build from `process.cwd()` land there too.
 */
import { promises as fsp } from 'node:fs';
import path from 'node:path';

let filesRoot: string | undefined;

/** Where `useFS` is rooted from now on: the router's `files.dir`, or an isolate's own folder. */
export function setFilesRoot(dir: string): void {
  filesRoot = path.resolve(dir);
}

/** The files directory: as set, else `.bcms/files` under the working directory. */
export function getFilesRoot(): string {
  return filesRoot ?? path.resolve('.bcms', 'files');
}

/** One file of `fs.fileTree`, as purple-cheetah gives it: its absolute and relative paths, and its folder. */
export interface FSFileTreeItem {
  path: { abs: string; rel: string };
  dir: string;
}
/** What `fs.fileTree` resolves to. */
export type FSFileTreeList = FSFileTreeItem[];

/** purple-cheetah's file system helper: each path is a string or its segments. */
export interface FS {
  exist(root: string | string[], isFile?: boolean): Promise<boolean>;
  save(root: string | string[], data: string | Buffer): Promise<void>;
  mkdir(root: string | string[]): Promise<void>;
  read(root: string | string[]): Promise<Buffer>;
  readString(root: string | string[]): Promise<string>;
  readdir(root: string | string[]): Promise<string[]>;
  deleteFile(root: string | string[]): Promise<void>;
  deleteDir(root: string | string[]): Promise<void>;
  rename(root: string | string[], currName: string, newName: string): Promise<void>;
  fileTree(startingLocation: string | string[], currentLocation: string | string[]): Promise<FSFileTreeList>;
  copy(srcPath: string | string[], destPath: string | string[]): Promise<void>;
  move(srcPath: string | string[], destPath: string | string[]): Promise<void>;
}

/** `useFS`'s config, as purple-cheetah's: where relative paths start, inside the files directory. */
export interface FSConfig {
  /** Where relative paths start: inside the files directory (an absolute path must be in it). */
  base?: string | string[];
}

/** Thrown for a path that leads out of the files directory. */
export class FilesRootError extends Error {
  constructor(target: string, root: string) {
    super(`useFS: ${target} is outside the service's files directory (${root}); use a path inside it`);
    this.name = 'FilesRootError';
  }
}

const joined = (location: string | string[]): string => (Array.isArray(location) ? path.join(...location) : location);

/**
 * A file system helper whose paths resolve against `config.base` (itself inside the files
 * directory; the directory itself without one) and which refuses any path leading out of it.
 */
export function useFS(config: FSConfig = {}): FS {
  const root = getFilesRoot();
  const inside = (target: string): string => {
    const relative = path.relative(root, target);
    if (relative.startsWith('..') || path.isAbsolute(relative)) throw new FilesRootError(target, root);
    return target;
  };
  const base = inside(config.base === undefined ? root : path.resolve(root, joined(config.base)));
  const at = (location: string | string[]): string => inside(path.resolve(base, joined(location)));

  const fs: FS = {
    async exist(location, isFile = false) {
      try {
        const stat = await fsp.stat(at(location));
        return isFile ? stat.isFile() : true;
      } catch (error) {
        if (error instanceof FilesRootError) throw error;
        return false;
      }
    },
    async save(location, data) {
      const file = at(location);
      await fsp.mkdir(path.dirname(file), { recursive: true });
      await fsp.writeFile(file, data);
    },
    async mkdir(location) {
      await fsp.mkdir(at(location), { recursive: true });
    },
    read: (location) => fsp.readFile(at(location)),
    readString: (location) => fsp.readFile(at(location), 'utf8'),
    readdir: (location) => fsp.readdir(at(location)),
    deleteFile: (location) => fsp.unlink(at(location)),
    deleteDir: (location) => fsp.rm(at(location), { recursive: true, force: true }),
    async rename(location, currName, newName) {
      const dir = at(location);
      await fsp.rename(at(path.join(dir, currName)), at(path.join(dir, newName)));
    },
    async fileTree(startingLocation, currentLocation) {
      const start = at(startingLocation);
      const list: FSFileTreeList = [];
      const walk = async (relative: string): Promise<void> => {
        for (const entry of await fsp.readdir(path.join(start, relative), { withFileTypes: true })) {
          const rel = path.join(relative, entry.name);
          if (entry.isDirectory()) await walk(rel);
          else list.push({ path: { abs: path.join(start, rel), rel }, dir: relative });
        }
      };
      await walk(joined(currentLocation));
      return list;
    },
    async copy(srcPath, destPath) {
      const target = at(destPath);
      await fsp.mkdir(path.dirname(target), { recursive: true });
      await fsp.cp(at(srcPath), target, { recursive: true });
    },
    async move(srcPath, destPath) {
      const target = at(destPath);
      await fsp.mkdir(path.dirname(target), { recursive: true });
      await fsp.rename(at(srcPath), target);
    },
  };
  return fs;
}
