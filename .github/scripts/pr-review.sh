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
# Environment: PYTHON (default python3) runs the reviewer's CLI (in CI: the base branch's); HEAD_SHA, the pull
# request's head commit; ACCEPTED_STATEFUL_KEYS, the acceptance keys that maintainers' comments name for that commit
# (pr-resolve.py reads them, only while the label ALLOW_LABEL, default allow-stateful-replacement, is set);
# ALLOW_STATEFUL_REPLACEMENT=true when the label is set. A stateful change passes only while the label is set and its
# acceptance key, which the review prints, is one of the accepted: the label alone accepts nothing.
# Exit: 0 passed (no stateful resource replaced or removed, or exactly these accepted at this head); 3 a stateful
# change nobody accepted (the review's own code for it); 2 the review refused its input; anything else (1, a Python
# traceback; 128+N, a signal) the review crashed. Only 0 passes the gate; only 3 can be accepted.
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

# The review's own exit for a stateful change, and the key it names that set of resources by (its stderr's last line).
stateful_change=3
key=""
accepted=false
if [ "$status" -eq "$stateful_change" ]; then
  key=$(tail -n 1 "$errors" | sed -n 's/.*(acceptance key \([0-9a-f]\{16\}\))$/\1/p')
fi
if [ -n "$key" ] && [ "${ALLOW_STATEFUL_REPLACEMENT:-false}" = "true" ]; then
  for candidate in ${ACCEPTED_STATEFUL_KEYS:-}; do
    if [ "$candidate" = "$key" ]; then
      accepted=true
    fi
  done
fi

{
  echo "$marker"
  if [ "$status" -eq 0 ] || [ "$status" -eq "$stateful_change" ]; then
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
    "$stateful_change")
      if [ "$accepted" = true ]; then
        echo "⚠️ **Gate overridden**: a maintainer accepted exactly these resources at this head commit (the \`$label\` label and a comment naming commit ${HEAD_SHA:-?} and key $key): $(tail -n 1 "$errors")"
      else
        echo "❌ **Gate failed**: $(tail -n 1 "$errors")"
        echo
        if [ "${ALLOW_STATEFUL_REPLACEMENT:-false}" = "true" ]; then
          echo "The \`$label\` label is set, but no maintainer's comment accepts these resources at this head commit."
        fi
        echo "If this is intended (data migrated or disposable), a maintainer comments on the pull request, on a line of its own:"
        echo
        echo '```text'
        echo "$label ${HEAD_SHA:-HEAD_SHA} ${key:-KEY}"
        echo '```'
        echo
        echo "and adds the \`$label\` label (which re-runs this review; if it is set already, re-run the review). It accepts these resources at this commit only: a new push, or another set of resources, needs a new comment."
      fi
      ;;
    2)
      echo "❌ **The review could not run**: it refused its input:"
      echo
      echo '```text'
      cat "$errors"
      echo '```'
      ;;
    *)
      echo "❌ **The review could not run**: it crashed (exit $status):"
      echo
      echo '```text'
      tail -n 40 "$errors"
      echo '```'
      ;;
  esac
} >"$comment"

cat "$errors" >&2
if [ "$accepted" = true ]; then
  exit 0
fi
exit "$status"
