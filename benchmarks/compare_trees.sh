#!/bin/bash
# The four figures of issue 21 for several checkouts, interleaved, twice (each checkout with its own .venv):
#   bash benchmarks/compare_trees.sh OUT_FOLDER TREE...
# e.g. `git worktree add --detach /tmp/before 184bffb` (and a venv in it), then
#   bash benchmarks/compare_trees.sh /tmp/bench /tmp/before "$PWD"
# Runs cache.py --repeat 3 --skip-corpus --skip-memory, grown_cli.py --pairs 3, coldstart.py --repeat 5 and
# serve.py --repeat 20 from each tree's benchmarks/ folder; one output file per benchmark, tree and round.
set -u
out=$1; shift; mkdir -p "$out"
run() { tree=$1; shift; ( cd "$tree/benchmarks" && HAMILTON_AUTOLOAD_EXTENSIONS=0 "$tree/.venv/bin/python" "$@" ); }
for round in 1 2; do
  for bench in "cache.py --repeat 3 --skip-corpus --skip-memory" "grown_cli.py --pairs 3" "coldstart.py --repeat 5" "serve.py --repeat 20"; do
    for tree in "$@"; do
      name=${bench%%.py*}
      run "$tree" $bench > "$out/$name-$(basename "$tree")-$round.txt" 2>&1
      echo "$(date +%T) $name $tree $round" >> "$out/log"
    done
  done
done
