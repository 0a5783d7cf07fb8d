#!/usr/bin/env bash
# Smoke runs of examples/moe for CI: a few steps of a small model with each
# strategy, the comparison table, a checkpoint resumed on another mesh, an
# interruption, and mistakes found before any work (exit status 2, one
# line naming the flag, nothing on stdout; 1 for files).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source examples/internal/smoke.sh
go build -o "$out/moe" ./examples/moe
small=(-dim 32 -layers 2 -heads 2 -experts 8 -hidden 32 -context 32 -batch 16 -eval-batches 1 -sample 40)
"$out/moe" "${small[@]}" -steps 10 -eval-every 5 -plot "$out/moe.png"
test -s "$out/moe.png"
for s in single ep fsdp_ep; do
  "$out/moe" "${small[@]}" -steps 4 -eval-every 4 -plot "" -strategy "$s"
done
"$out/moe" "${small[@]}" -strategy compare
# bf16 mixed precision, experts on one device and the dense model under FSDP.
bf=$("$out/moe" "${small[@]}" -strategy single -dtype bf16 -steps 4 -eval-every 4 -plot "")
grep -q "^mixed precision: params=float32,compute=bfloat16,output=float32" <<<"$bf"
usage '^moe: -dtype bf16 trains experts with -strategy single' "$out/moe" "${small[@]}" -dtype bf16 -steps 1
# The dense variant (one MLP per block), and its flags checked.
dense=(-dim 32 -layers 2 -heads 2 -hidden 64 -context 32 -batch 16 -eval-batches 1 -sample 20)
"$out/moe" "${dense[@]}" -ffn dense -strategy single -steps 4 -eval-every 2 -plot "$out/dense.png"
test -s "$out/dense.png"
# The dense model under FSDP (its default strategy) and DP on 4 devices.
"$out/moe" "${dense[@]}" -ffn dense -mesh dp=4 -steps 2 -eval-every 2 -plot ""
"$out/moe" "${dense[@]}" -ffn dense -strategy dp -mesh dp=4 -steps 2 -eval-every 2 -plot ""
"$out/moe" "${dense[@]}" -ffn dense -mesh dp=4 -dtype bf16 -steps 2 -eval-every 2 -plot ""
usage '^moe: -strategy "dp_ep": -ffn dense trains with single, dp or fsdp' "$out/moe" "${dense[@]}" -ffn dense -strategy dp_ep -steps 1
usage '^moe: -strategy fsdp trains a dense model: add -ffn dense' "$out/moe" "${small[@]}" -strategy fsdp -steps 1
usage '^moe: -ffn dense has no experts' "$out/moe" "${dense[@]}" -ffn dense -strategy single -experts 4 -steps 1
"$out/moe" "${small[@]}" -steps 4 -eval-every 2 -plot "" -ckpt "$out/ckpt"
resumed=$("$out/moe" "${small[@]}" -steps 6 -eval-every 2 -plot "" -ckpt "$out/ckpt" -strategy ep -mesh ep=8)
grep -q "resumed from" <<<"$resumed"
grep -q "the learning-rate schedule now decays over 6" <<<"$resumed"
# The checkpoint knows its model: another one is refused, naming the flag.
usage '^moe: -ckpt .* holds step 6 of another run: -heads: the checkpoint was saved with 2, this run has 4' \
  "$out/moe" "${small[@]}" -heads 4 -steps 8 -plot "" -ckpt "$out/ckpt"

# Ctrl-C names the last checkpoint and exits 130.
interrupt "$out/ick" "$out/moe" "${small[@]}" -steps 1000000 -eval-every 1 -plot "" -ckpt "$out/ick"

tiny=("${small[@]}" -steps 1 -plot "")
usage '^moe: -strategy "foo": want one of' "$out/moe" "${tiny[@]}" -strategy foo
usage '^moe: -batch 3 is not a multiple of the 8 devices' "$out/moe" "${tiny[@]}" -batch 3
usage '^moe: -batch 16 is not a multiple of the 3 devices' "$out/moe" "${tiny[@]}" -mesh ep=3
usage '^moe: -mesh "ep=8": -strategy single trains on one device' "$out/moe" "${tiny[@]}" -strategy single -mesh ep=8
usage '^moe: -lr \+Inf: want a finite number' "$out/moe" "${tiny[@]}" -lr Inf
usage '^moe: -topk 9 exceeds -experts 8' "$out/moe" "${tiny[@]}" -topk 9
usage '^moe: GONOX_KERNELS="bogus": unknown kernel set' env GONOX_KERNELS=bogus "$out/moe" "${tiny[@]}"
# The default prompt "Light is " needs an 'L': found before training.
tr -d 'L' <<<"$(head -c 20000 examples/moe/main.go)" >"$out/noL.txt"
usage "^moe: -prompt \"Light is \": the character 'L' is not in noL.txt" "$out/moe" "${tiny[@]}" -text "$out/noL.txt"
expect 1 '^moe: -text /dev/zero: larger than 64 MiB' "$out/moe" "${tiny[@]}" -text /dev/zero
expect 1 "^moe: -plot $out: is a directory" "$out/moe" "${small[@]}" -steps 1 -plot "$out"
expect 1 "^moe: -ckpt $out/moe.png: not a directory" "$out/moe" "${tiny[@]}" -ckpt "$out/moe.png"

# Word pieces (a BPE learnt from the text); a token file of 20 GB (sparse)
# trained on within 100 MB of the peak memory of the run on the text; a
# FIFO or a missing file given as -data fails at once, naming it.
"$out/moe" "${small[@]}" -steps 2 -eval-every 2 -plot "" -tokenizer bpe -bpe-size 300
bench/bigdata.sh
mkfifo "$out/fifo"
expect 1 "^moe: -data: data: $out/fifo: not a regular file" "$out/moe" "${tiny[@]}" -data "$out/fifo"
expect 1 "^moe: -data: .*$out/missing.tok" "$out/moe" "${tiny[@]}" -data "$out/missing.tok"
usage '^moe: -tokenizer "word": want char or bpe' "$out/moe" "${tiny[@]}" -tokenizer word
