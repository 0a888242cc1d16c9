# Shared by the bench/run_*.sh scripts. Sourced, not executed.

# median_ms REPEATS CMD...: runs CMD REPEATS times (stdout to /dev/null) and prints the median wall time in ms.
median_ms() {
  local repeats=$1
  shift
  local times=()
  for _ in $(seq "$repeats"); do
    local start end
    start=$(date +%s%N)
    "$@" > /dev/null
    end=$(date +%s%N)
    times+=($(( (end - start) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
