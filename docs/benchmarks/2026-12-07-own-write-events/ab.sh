#!/bin/bash
export KUBEBUILDER_ASSETS=/root/.cache/opkit/controlplane/k8s-v1.37.2_etcd-v3.6.16_kwok-v0.8.0_linux-amd64
cd /work/main/bench
for cycle in 1 2; do
  for v in ceiling A B C; do
    b=$v; c=opkit
    if [ $v = ceiling ]; then b=C; c=ceiling; fi
    echo "== cycle $cycle variant $v $(date +%T)"
    /work/out/bench-$b --n 5000 --contenders $c --scenarios converge --rounds 1 --out /work/out/ab/$cycle-$v 2>&1 | grep 'converge ' 
  done
done
echo done
