#!/usr/bin/env bash
# genfence list --kinds names, per kind, the sampler-profile keys it takes at
# the case level beyond its own keys line (docs/sampler.md): the keys are the
# ones the kind's parse asks for (gf_kind_keys), so the line follows the
# kinds' code. The kinds that read a whole sampler name the profile and
# filters; a fence names its truncation filters and none of the penalties,
# biases and history it refuses at the key (gf_y_refuse); the kinds without
# a sampler name none.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init list_kinds_sampler
out=$("$GENFENCE" list --kinds)
# sampler_line KIND: the 'sampler keys:' line under KIND's entry, if any
sampler_line() { awk -v k="$1" '$1 == k {on = 1; next} on && /^[a-z_]/ {exit} on && /sampler keys:/ {print}' <<<"$out"; }
for k in sampling_distribution seeded_reproducibility eos golden_generation sampler_probs; do
  l=$(sampler_line "$k")
  for key in profile chain min_p typical_p repetition_penalty logit_bias min_new_tokens stop_token_ids; do
    grep -q "[ ,]$key[,( ]" <<<"$l " || fail "$k: '$key' not named: ${l:-no sampler keys line}"
  done
done
for k in stream_decode stop_strings cache_equals_recompute left_padding_positions; do
  l=$(sampler_line "$k")
  [[ -z "$l" ]] || fail "$k names sampler keys it does not take: $l"
done
# the fences take their truncation filters and refuse the rest
for k in top_p_fence top_k_fence; do
  l=$(sampler_line "$k")
  grep -q 'sampler keys: profile, chain, min_p, typical_p, min_tokens_to_keep, xtc_probability, xtc_threshold, xtc_min_keep, top_n_sigma, mirostat, mirostat_tau, mirostat_eta, mirostat_mu, epsilon_cutoff, eta_cutoff, allowed_token_ids, structured_output_mask (' <<<"$l" \
    || fail "$k: not exactly its truncation filters: ${l:-no sampler keys line}"
  "$GENFENCE" list --kinds | awk -v k="$k" '$1 == k {getline; print}' | gf_grepq -q 'top_k\|seed\|penalty\|logit_bias' \
    && fail "$k's keys line names a key it refuses"
done
echo "list_kinds_sampler: ok"
