#!/bin/bash
# The CLM candidates of clm-fmnist.md on seed 1's split, ε 10, λ 0.7, through a server: each trains on the
# repro database's t1_d1 (trainings run concurrently), is privatised from t1_d2 with Laplace at ε_x 7 and
# classified with the marginal classifier the repro uses, then read on the 10,000 clean test images.
# Usage: DB=path/repro.duckdb screen.sh PORT 'name:{params}' ...
# DB: a copy of the database of `ldpsql repro data-collection --eps 10 --mechanisms vlm,clm --trials 1
# --vlm-epochs 20 --out DIR` (seed 1); B: the ldpsql binary (default bin/ldpsql).
B=${B:-bin/ldpsql}
PORT=$1; shift
nice -n 19 $B serve --addr 127.0.0.1:$PORT --db "$DB" >> "$DB.serve.log" 2>&1 &
SP=$!
sleep 10
q() { mysql -h127.0.0.1 -P$PORT -uroot --batch --skip-column-names -e "$1" ldpsql; }
wait_job() {
  for i in $(seq 1 2000); do
    st=$(q "SELECT state FROM ldpsql_catalog.ldp_jobs WHERE id = $1")
    [ "$st" != "running" ] && [ "$st" != "queued" ] && break; sleep 10
  done
  echo "job $1: $st $(q "SELECT error FROM ldpsql_catalog.ldp_jobs WHERE id = $1") $(date +%T)"
}
declare -A ids
for v in "$@"; do
  name=${v%%:*}; params=${v#*:}
  echo "== $name $params $(date +%T)"
  ids[$name]=$(q "CALL ldp_train_mechanism('$name', 'clm', 't1_d1', 'features', '$params')")
done
for v in "$@"; do
  name=${v%%:*}
  wait_job ${ids[$name]}
  q "CALL ldp_privatize('t1_d2', 'features', 'label', '${name}_d2', 10, 0.7, '$name', 'laplace', 10)"
  id=$(q "SELECT TRAIN_NOISY_CLASSIFIER('${name}_d2', '{\"model\":\"${name}_clf\",\"objective\":\"marginal\",\"seed\":1,\"epochs\":60,\"aux_table\":\"t1_d1\",\"batch_size\":512,\"lr\":0.002}')"); wait_job $id
  echo "$name accuracy: $(q "SELECT AVG(CASE WHEN PREDICT('${name}_clf', features) = label THEN 1.0 ELSE 0.0 END) FROM fmnist_test") $(date +%T)"
done
kill $SP
