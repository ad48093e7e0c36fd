#!/usr/bin/env bash
# The PR review gate, run by .github/workflows/pr-review.yml from the default branch's checkout (never the pull
# request's) on the default branch's synthesis and the pull request's (an artifact of
# .github/workflows/pr-synthesis.yml); runs the same on a laptop:
#
#   .github/scripts/pr-review.sh BASE_DIR HEAD_DIR COMMENT_FILE
#
# BASE_DIR and HEAD_DIR each hold cdk.out/, dist/ and cost.json (`skyrl-hp cost --json` of that tree).
# COMMENT_FILE receives the pull-request comment: a marker line (the workflow finds its own comment by it),
# the review's Markdown and the gate's verdict.
# Environment: PYTHON (default python3) runs the reviewer's CLI (in CI: the base branch's);
# ALLOW_STATEFUL_REPLACEMENT=true when a maintainer set the label ALLOW_LABEL (default allow-stateful-replacement).
# Exit: 0 pass (or allowed by the label), 1 stateful replacement not allowed, 2 the review could not run.
set -euo pipefail

if [ "$#" -ne 3 ]; then
  echo "usage: $0 BASE_DIR HEAD_DIR COMMENT_FILE" >&2
  exit 2
fi
base=$1
head=$2
comment=$3
python=${PYTHON:-python3}
label=${ALLOW_LABEL:-allow-stateful-replacement}
marker='<!-- skyrl-hp-review -->'
# GitHub refuses comments over 65536 characters.
max_body_chars=60000

body=$(mktemp)
errors=$(mktemp)
trap 'rm -f "$body" "$errors"' EXIT

status=0
"$python" -m skyrl_hyperpod.cli review "$base" "$head" --fail-on-stateful-replacement --output "$body" \
  2>"$errors" || status=$?

{
  echo "$marker"
  if [ "$status" -eq 0 ] || [ "$status" -eq 1 ]; then
    if [ "$(wc -c <"$body")" -gt "$max_body_chars" ]; then
      head -c "$max_body_chars" "$body"
      printf '\n\n… (cut at %s characters: run skyrl-hp review locally for the whole review)\n' "$max_body_chars"
    else
      cat "$body"
    fi
  fi
  echo
  case "$status" in
    0) echo "✅ **Gate passed**: no stateful resource is replaced or removed." ;;
    1)
      if [ "${ALLOW_STATEFUL_REPLACEMENT:-false}" = "true" ]; then
        echo "⚠️ **Gate overridden** by the \`$label\` label: $(cat "$errors")"
      else
        echo "❌ **Gate failed**: $(cat "$errors")"
        echo
        echo "If this is intended (data migrated or disposable), a maintainer adds the \`$label\` label."
      fi
      ;;
    *)
      echo "❌ **The review could not run**:"
      echo
      echo '```text'
      cat "$errors"
      echo '```'
      ;;
  esac
} >"$comment"

cat "$errors" >&2
if [ "$status" -eq 1 ] && [ "${ALLOW_STATEFUL_REPLACEMENT:-false}" = "true" ]; then
  exit 0
fi
exit "$status"
