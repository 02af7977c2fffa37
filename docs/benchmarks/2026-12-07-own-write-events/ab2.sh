#!/bin/bash
export KUBEBUILDER_ASSETS=/root/.cache/opkit/controlplane/k8s-v1.37.2_etcd-v3.6.16_kwok-v0.8.0_linux-amd64
cd /work/main/bench
for v in C A B B C A; do
    echo "== variant $v $(date +%T)"
    /work/out/bench-$v --n 5000 --contenders opkit --scenarios converge --rounds 1 --out /work/out/ab2/$v-$(date +%s) 2>&1 | grep 'converge '
done
echo done
