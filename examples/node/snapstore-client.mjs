// A client for `snapstore serve`, with nothing but Node's standard library.
//
// It spawns one server, writes one JSON-RPC request per line on its stdin, and matches the
// lines it reads back to the requests by id. Progress notifications go to the onProgress
// callback of the request they belong to. docs/protocol.md is the specification.
//
//   import { SnapstoreClient } from "./snapstore-client.mjs";
//   const client = SnapstoreClient.spawn({ root: "/path/to/store" });
//   await client.call("create", { session: "s", paths: ["src"], base_dir: "/project" });
//   await client.close();

import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The `snapstore` executable to run: $SNAPSTORE, else `snapstore` on the PATH, else the one in
 * this checkout's virtualenv (`.venv/bin/snapstore`, two directories up). Throws an Error
 * saying how to install or point to it when there is none.
 */
export function findSnapstore(env = process.env) {
  if (env.SNAPSTORE) return env.SNAPSTORE;
  for (const dir of (env.PATH || "").split(delimiter).filter(Boolean)) {
    if (executable(join(dir, "snapstore"))) return join(dir, "snapstore");
  }
  const here = dirname(fileURLToPath(import.meta.url));
  const venv = join(here, "..", "..", ".venv", "bin", "snapstore");
  if (executable(venv)) return venv;
  throw new Error(
    "snapstore not found: not in $SNAPSTORE, on the PATH, nor in this checkout's .venv; " +
      "install it (pip install snapstore) or set SNAPSTORE=/path/to/snapstore",
  );
}

/** An error response: `code` from the protocol's table, `type` the snapstore error type. */
export class SnapstoreError extends Error {
  constructor(error) {
    super(error.message);
    this.name = "SnapstoreError";
    this.code = error.code;
    this.data = error.data ?? {};
    this.type = this.data.type ?? null;
  }
}

export class SnapstoreClient {
  /**
   * Start `snapstore [--root ROOT] serve`. `command` is the executable (default:
   * `findSnapstore()`); `args` come before `serve`.
   */
  static spawn({ command = findSnapstore(), root, args = [], cwd } = {}) {
    const argv = [...(root ? ["--root", root] : []), ...args, "serve"];
    const child = spawn(command, argv, { cwd, stdio: ["pipe", "pipe", "inherit"] });
    return new SnapstoreClient(child);
  }

  constructor(child) {
    this.child = child;
    this.nextId = 1;
    this.pending = new Map();
    this.spawnError = null;
    this.exited = new Promise((resolve) => {
      child.on("exit", (code, signal) => resolve(code ?? signal));
      child.on("error", (error) => {
        // The server could not be started (or killed): nothing more will come from it.
        this.spawnError = error;
        this.failAll(error);
        resolve(null);
      });
    });
    child.stdin.on("error", (error) => this.failAll(error));
    const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
    lines.on("line", (line) => this.receive(line));
    lines.on("close", () => this.failAll(new Error("snapstore serve closed its output")));
  }

  receive(line) {
    if (!line.trim()) return;
    const message = JSON.parse(line);
    if (message.method === "progress") {
      const waiting = this.pending.get(message.params.id);
      waiting?.onProgress?.(message.params.done, message.params.total);
      return;
    }
    const waiting = this.pending.get(message.id);
    if (!waiting) return;
    this.pending.delete(message.id);
    if (message.error) waiting.reject(new SnapstoreError(message.error));
    else waiting.resolve(message.result);
  }

  failAll(error) {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }

  /**
   * Call `method` with named `params`; resolves to the result, rejects with SnapstoreError.
   * With `onProgress(done, total)`, asks the server for progress notifications.
   */
  call(method, params = {}, { onProgress } = {}) {
    const id = this.nextId++;
    const request = { jsonrpc: "2.0", id, method, params: onProgress ? { ...params, progress: true } : params };
    return new Promise((resolve, reject) => {
      if (this.spawnError) return reject(this.spawnError);
      this.pending.set(id, { resolve, reject, onProgress });
      this.child.stdin.write(JSON.stringify(request) + "\n");
    });
  }

  /** Close the server's stdin (it finishes what it was asked and exits); its exit code. */
  async close() {
    this.child.stdin.end();
    return this.exited;
  }
}
