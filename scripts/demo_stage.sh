#!/usr/bin/env bash
# Time one stage of `make demo` and append it to a table; or print that table.
#   scripts/demo_stage.sh FILE "stage name" command [args...]   run the command, record its times
#   scripts/demo_stage.sh --table FILE                           print the table (one line per stage)
# Wall time is the clock; CPU time is user + system of the command and all its children, so a
# stage that waits on the network or the disk shows wall > CPU, and a stage that keeps both cores
# busy shows CPU close to twice the wall time on a 2-core machine.
set -u

secs() {  # "1m2.345s" -> 62.345
  awk -v t="$1" 'BEGIN { split(t, a, "m"); sub("s", "", a[2]); printf "%.1f", a[1] * 60 + a[2] }'
}

clock() {  # 62.3 -> 1:02
  awk -v s="$1" 'BEGIN { s = int(s + 0.5); printf "%d:%02d", int(s / 60), s % 60 }'
}

if [ "${1:-}" = "--table" ]; then
  file=$2
  [ -f "$file" ] || { echo "no stage times in $file" >&2; exit 1; }
  printf '%-16s %9s %16s\n' "stage" "wall" "CPU (user+sys)"
  awk -F'\t' '{ print $1 "\t" $2 "\t" $3 }' "$file" | while IFS=$'\t' read -r name wall cpu; do
    printf '%-16s %9s %16s\n' "$name" "$(clock "$wall")" "$(clock "$cpu")"
  done
  awk -F'\t' '{ w += $2; c += $3 } END { printf "%.1f\t%.1f\n", w, c }' "$file" | while IFS=$'\t' read -r wall cpu; do
    printf '%-16s %9s %16s\n' "total" "$(clock "$wall")" "$(clock "$cpu")"
  done
  exit 0
fi

file=$1
name=$2
shift 2
start=$(date +%s.%N)
"$@"
rc=$?
end=$(date +%s.%N)
tfile=$(mktemp)
times >"$tfile"  # in this shell, not a subshell: the second line is the children's user and system time
read -r cu cs < <(sed -n 2p "$tfile")
rm -f "$tfile"
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
cpu=$(awk -v u="$(secs "$cu")" -v s="$(secs "$cs")" 'BEGIN { printf "%.1f", u + s }')
mkdir -p "$(dirname "$file")"
printf '%s\t%s\t%s\t%s\n' "$name" "$wall" "$cpu" "$rc" >>"$file"
exit $rc
