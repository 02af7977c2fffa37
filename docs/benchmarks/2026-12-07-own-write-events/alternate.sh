#!/bin/bash
# alternate.sh SCENARIO N VARIANT...: runs opkit alone, SCENARIO at N, once per
# VARIANT in the order given, with the benchmark binary /work/out/bench-VARIANT
# (A, B, C: see README.md), each on a fresh control plane.
scenario=$1 n=$2
shift 2
export KUBEBUILDER_ASSETS=/root/.cache/opkit/controlplane/k8s-v1.37.2_etcd-v3.6.16_kwok-v0.8.0_linux-amd64
cd /work/main/bench
for v in "$@"; do
    echo "== variant $v $(date +%T)"
    /work/out/bench-$v --n "$n" --contenders opkit --scenarios "$scenario" --rounds 1 --out "/work/out/ab-$scenario/$v-$(date +%s)" 2>&1 | grep "$scenario "
done
echo done
