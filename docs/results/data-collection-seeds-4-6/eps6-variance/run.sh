#!/usr/bin/env bash
# #11 diagnosis: at ε = 6, seed 3's encoders (Table 5.1's run), how much of a cell's spread is the
# classifier's own seed (same release) and how much the release's noise draw (same classifier seed)?
export LDPSQL_DATA=/work/shared/data
B=/tmp/full-runs/bin2/ldpsql
cd /tmp/var11
$B serve --db /tmp/var11/repro.duckdb --addr 127.0.0.1:33061 > serve.log 2>&1 &
SERVE=$!
trap 'kill $SERVE' EXIT
sleep 15
sqlq() { mysql -h 127.0.0.1 -P 33061 -u root -N -B -e "$1" ldpsql 2>&1; }
acc() { sqlq "SELECT AVG(CASE WHEN PREDICT('$1', features) = label THEN 1.0 ELSE 0.0 END) FROM fmnist_test"; }
clf() { # model table seed
  job=$(sqlq "SELECT TRAIN_NOISY_CLASSIFIER('$2', '{\"model\":\"$1\",\"objective\":\"marginal\",\"seed\":$3,\"epochs\":60,\"aux_table\":\"t3_d1\",\"batch_size\":512,\"lr\":0.002}')")
  while :; do
    st=$(sqlq "SELECT state FROM ldpsql_catalog.ldp_jobs WHERE id = $job")
    case "$st" in running|queued|pending|"") sleep 3;; *) break;; esac
  done
  echo "$(date -u +%T) $1 table=$2 seed=$3 job=$job status=$st acc=$(acc $1)" >> results.txt
}
for enc in vlm pca; do
  for s in 101 102 103 104; do clf "v_${enc}_same_s$s" "t3_${enc}_e6_d2" $s; done
  for r in 1 2 3 4; do
    sqlq "CALL ldp_privatize('t3_d2', 'features', 'label', 'v_${enc}_r$r', 6, 0.7, 't3_${enc}_e6', 'laplace', 10)" > /dev/null
    clf "v_${enc}_r${r}_s3" "v_${enc}_r$r" 3
  done
done
echo "$(date -u +%T) done" >> results.txt
