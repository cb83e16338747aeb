// An editor bridge in Node, talking to one long-running `snapstore serve`: checkpoint a
// sample project, edit it, look at the diff, restore, check it byte for byte, undo the
// restore, check again, and verify the store. The Node twin of examples/bridge_demo.py.
//
//   node examples/node/bridge-demo.mjs   ($SNAPSTORE, snapstore on the PATH, or this checkout's .venv)
//
// Exits 0 when every check passes, 1 otherwise (with a message when snapstore cannot be run).

import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { SnapstoreClient, findSnapstore } from "./snapstore-client.mjs";

const SESSION = "editor-session";
const FILES = {
  "README.md": "# demo\n",
  "src/app.py": "print('hello')\n",
  "src/util.py": "def helper():\n    return 42\n",
  "config.json": '{"debug": false}\n',
};
const TOUCHED = ["src", "config.json", "NOTES.md"];

function writeTree(base, files) {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(base, path)), { recursive: true });
    writeFileSync(join(base, path), content);
  }
}

function readTree(base, dir = base, found = {}) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) readTree(base, path, found);
    else found[relative(base, path)] = readFileSync(path).toString("latin1");
  }
  return found;
}

function sameTree(actual, expected) {
  const keys = Object.keys(expected).sort();
  return JSON.stringify(Object.keys(actual).sort()) === JSON.stringify(keys) &&
    keys.every((key) => actual[key] === expected[key]);
}

async function main() {
  const command = findSnapstore();
  const work = mkdtempSync(join(tmpdir(), "bridge-demo-node-"));
  const checks = [];
  let client = null;
  try {
    const project = join(work, "project");
    writeTree(project, FILES);
    client = SnapstoreClient.spawn({ command, root: join(work, "store") });
    const hello = await client.call("initialize");
    console.log(`server ${hello.server.version}, protocol ${hello.protocol_version}, root ${hello.root}`);

    let reported = 0;
    const created = await client.call(
      "create",
      { session: SESSION, name: "before-edit", paths: TOUCHED, base_dir: project, meta: { bridge: "node" } },
      { onProgress: () => reported++ },
    );
    console.log(`checkpointed ${created.snapshot.file_count} files as ${SESSION}/before-edit (${reported} progress reports)`);

    writeFileSync(join(project, "src/app.py"), "print('edited')\n");
    unlinkSync(join(project, "config.json"));
    writeFileSync(join(project, "NOTES.md"), "new file\n");
    const edited = readTree(project);
    console.log("edited: modified src/app.py, deleted config.json, added NOTES.md");

    const diff = await client.call("diff", { session: SESSION, name: "before-edit" });
    console.log(`diff: added ${diff.added}, modified ${diff.modified}, removed ${diff.removed}`);
    checks.push(["diff", diff.changed && diff.added.join() === "NOTES.md" &&
      diff.modified.join() === "src/app.py" && diff.removed.join() === "config.json"]);

    const restored = await client.call("restore", { session: SESSION, name: "latest" });
    console.log(`restored: wrote ${restored.written}, removed ${restored.removed}, undo backup ${restored.backup}`);
    checks.push(["restored byte for byte", sameTree(readTree(project), FILES)]);

    const file = await client.call("read", { session: SESSION, name: "before-edit", path: "src/app.py" });
    checks.push(["read", Buffer.from(file.base64, "base64").toString() === FILES["src/app.py"]]);

    const undone = await client.call("undo", { session: SESSION });
    console.log(`undone: wrote ${undone.written}, removed ${undone.removed}`);
    checks.push(["undo puts the edits back", sameTree(readTree(project), edited)]);

    try {
      await client.call("get", { session: SESSION, name: "no-such-checkpoint" });
      checks.push(["error for a missing snapshot", false]);
    } catch (error) {
      checks.push(["error for a missing snapshot", error.type === "SnapshotNotFound" && error.code === 1140]);
    }

    const verified = await client.call("verify", { deep: true });
    checks.push(["store verifies", verified.ok]);
  } finally {
    if (client) {
      const code = await client.close();
      checks.push(["server exits 0", code === 0]);
    }
    rmSync(work, { recursive: true, force: true });
  }
  for (const [name, ok] of checks) console.log(`${ok ? "ok  " : "FAIL"} ${name}`);
  return checks.every(([, ok]) => ok) ? 0 : 1;
}

try {
  process.exitCode = await main();
} catch (error) {
  console.error(`bridge-demo: ${error.message}`);
  process.exitCode = 1;
}
