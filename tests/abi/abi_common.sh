# Sourced by scripts/abi_dump.sh and tests/abi/check_abi.sh: how the public
# ABI of libddp.so is described. abidw keeps only what the exported ddp_*
# functions reach through the public headers.
abi_dump() {  # <libddp.so> <headers dir> <out.abi>
  abidw --exported-interfaces-only --headers-dir "$2" --drop-private-types --no-show-locs --no-corpus-path \
    --out-file "$3" "$1"
}
abi_symbols() {  # <libddp.so>: the exported ddp_* names, sorted
  nm -D --defined-only "$1" | awk '$2 ~ /^[TDBR]$/ && $3 ~ /^ddp_/ {print $3}' | sort
}
