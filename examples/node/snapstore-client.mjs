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
import { createInterface } from "node:readline";

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
   * Start `snapstore [--root ROOT] serve`. `command` is the executable (default: `snapstore`
   * on the PATH, or $SNAPSTORE); `args` come before `serve`.
   */
  static spawn({ command = process.env.SNAPSTORE || "snapstore", root, args = [], cwd } = {}) {
    const argv = [...(root ? ["--root", root] : []), ...args, "serve"];
    const child = spawn(command, argv, { cwd, stdio: ["pipe", "pipe", "inherit"] });
    return new SnapstoreClient(child);
  }

  constructor(child) {
    this.child = child;
    this.nextId = 1;
    this.pending = new Map();
    this.exited = new Promise((resolve) => {
      child.on("exit", (code, signal) => resolve(code ?? signal));
    });
    child.on("error", (error) => this.failAll(error));
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
