import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import type { Knex } from 'knex';
import request from 'supertest';
import type { App } from 'supertest/types';
import { signRequest } from '../../lib/client';
import type { DeploymentKind } from '../../lib/deploy/load';
import { type BcmsExtensionsOptions, type BcmsExtensionsRouter, type BcmsRegistry, bcmsExtensions } from '../../lib';
import { memoryLogger } from './app';
import { hmacKey } from './signature';
import { ROOMY } from './wait';

export type DeployKey = { keyId: string; secret: string };

/** A bundle as `bcms-ext bundle` writes one: CommonJS code with bcms-extensions left external. */
export function bundle(kind: DeploymentKind, name: string, code: string, extra: Record<string, unknown> = {}) {
  return { manifest: { kind, name, version: '1.0.0', sha256: createHash('sha256').update(code).digest('hex'), ...extra }, code };
}

/** A request to the deploy routes, signed with a deploy key (as `bcms-ext deploy` signs it). */
export function signed(app: App, method: 'GET' | 'POST' | 'DELETE', url: string, key: DeployKey, body?: unknown): request.Test {
  const payload = body === undefined ? '' : JSON.stringify(body);
  const headers = signRequest({ ...key, method, url, body: payload });
  const test = method === 'GET' ? request(app).get(url) : method === 'DELETE' ? request(app).delete(url) : request(app).post(url);
  test.set(headers);
  return payload === '' ? test : test.set('Content-Type', 'application/json').send(payload);
}

/** Deploys a bundle of `code` and expects it live (201). */
export async function deploy(app: App, key: DeployKey, kind: DeploymentKind, name: string, code: string, extra: Record<string, unknown> = {}): Promise<void> {
  const res = await signed(app, 'POST', '/api/extensions/deployments', key, bundle(kind, name, code, extra));
  if (res.status !== 201) throw new Error(`deploying ${kind} ${name} answered ${res.status}: ${res.text}`);
}

/** A public function bundle whose handler is `handler` (JavaScript source of `async (context) => ...`). */
export const functionSource = (name: string, handler: string, top = ''): string => `"use strict";
const { createBcmsFunction } = require('bcms-extensions');
${top}
exports.default = createBcmsFunction(async () => ({ config: { name: ${JSON.stringify(name)}, public: true }, handler: ${handler} }));`;

/** Whether a process of this id is running. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The code `bcms-ext bundle` would deploy for one entry file (a plugin's backend/main.ts, a
 * function's file), bundled by the built CLI's own bundler in a process of its own: CommonJS,
 * bcms-extensions left external. Run `npm run build` first.
 */
export function bundleFile(root: string, entry: string): string {
  const bundler = path.resolve(__dirname, '..', '..', 'dist', 'cli', 'bundle.js');
  const script = `require(${JSON.stringify(bundler)}).bundleEntry(${JSON.stringify(root)}, ${JSON.stringify(entry)}).then((code) => process.stdout.write(code), (error) => { process.stderr.write(String(error.message)); process.exit(1); })`;
  const result = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) throw new Error(`bundling ${entry} failed: ${result.stderr}`);
  return result.stdout;
}

/**
 * A project's node_modules linked to this repository's packages (bcms-extensions itself, built;
 * typescript, vite, @types/node): what npm install gives a project, without the network.
 */
export function linkProjectModules(dir: string): void {
  const root = path.resolve(__dirname, '..', '..');
  const modules = path.join(dir, 'node_modules');
  fs.mkdirSync(path.join(modules, '.bin'), { recursive: true });
  fs.mkdirSync(path.join(modules, '@types'), { recursive: true });
  fs.symlinkSync(root, path.join(modules, 'bcms-extensions'), 'dir');
  for (const name of ['typescript', 'vite', '@types/node']) fs.symlinkSync(path.join(root, 'node_modules', name), path.join(modules, name), 'dir');
  fs.symlinkSync(path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), path.join(modules, '.bin', 'tsc'));
}

/** A router that takes deploys, as a test starts one: its app, a deploy key, and a files folder of its own. */
export interface Deployable {
  router: BcmsExtensionsRouter;
  app: express.Express;
  deployer: DeployKey;
  /** Closes the router and removes its files folder. */
  close(): Promise<void>;
}

/**
 * A router on `knex` that takes deploys (a deploy key made for it, a files folder of its own); `options` add to the defaults,
 * which give loads and calls all the time a loaded machine may need (ROOMY): a test of a limit sets that one.
 */
export async function startDeployable(knex: Knex, registry: BcmsRegistry = {}, options: BcmsExtensionsOptions = {}): Promise<Deployable> {
  const filesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bcms-deployable-'));
  const router = bcmsExtensions(registry, { database: knex, logger: memoryLogger().logger, files: { dir: filesDir }, ...ROOMY, ...options });
  const app = express().use(router);
  await router.ready;
  const deployer = await hmacKey(knex, [], { deploy: true, name: 'deployer' });
  return {
    router,
    app,
    deployer,
    close: async () => {
      await router.close();
      fs.rmSync(filesDir, { recursive: true, force: true });
    },
  };
}
