#!/bin/bash
# Render the records under results/ into the book: the chapters' recorded figures, the results page
# and the intro's status box. Run it after the B200 kit (make b200 OUT=...), on the B200 or anywhere:
#   bash scripts/render_records.sh [OUT]
# OUT (optional) is the kit's folder: its records are copied into results/<gpu>/ first (b200 copy,
# which skips what is already there). Then NOTES.md's measured block is regenerated from the records
# and the book is built with every page executed (make book) with the GPU hidden
# (CUDA_VISIBLE_DEVICES=): the pages draw the records and launch no kernel, so a Blackwell step that
# fails cannot stop the build. The kit's published logs mark such a step failed, with the log of the
# phase that failed, on the results page and in the intro's box (gemm_course.measure.b200.step_status); the
# same table is printed last. Exit: the book build's (0: every page built warning-free).
# DRY_RUN=1 prints the commands and runs nothing.
set -u
case "${1:-}" in -h | --help) sed -n '2,12p' "$0" | cut -c3-; exit 0 ;; esac
cd "$(dirname "$0")/.." || exit 2
if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
run() {  # echo, then run unless DRY_RUN=1
  echo "+ $*"
  [ "${DRY_RUN:-0}" = 1 ] || "$@"
}
if [ $# -gt 0 ]; then
  run $PY -m gemm_course.measure.b200 copy "$1" || echo "render_records.sh: some files of $1 were not copied (see above); going on"
fi
run $PY -m gemm_course.measure.notes
run env CUDA_VISIBLE_DEVICES= make book
rc=$?
[ "${DRY_RUN:-0}" = 1 ] && exit 0
echo
echo "== each Blackwell step (python -m gemm_course.measure.b200 status)"
$PY -m gemm_course.measure.b200 status
echo
if [ $rc = 0 ]; then
  echo "The book: _build/html/index.html (the results page: _build/html/book/results.html)."
else
  echo "render_records.sh: the book build reported errors (exit $rc; above); the pages it could build are in _build/html/."
fi
exit $rc
