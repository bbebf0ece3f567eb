#!/bin/bash
# CLM variants on the clmrun database (seed 1's D1/D2 and the test set), ε 10, λ 0.7, through a server.
B=/work/clm-bin/ldpsql
DB=/work/clmrun/repro.duckdb
$B serve --addr 127.0.0.1:3399 --db $DB > /work/clmrun/serve.log 2>&1 &
SP=$!
sleep 8
q() { mysql -h127.0.0.1 -P3399 -uroot --batch --skip-column-names -e "$1" ldpsql; }
wait_job() {
  for i in $(seq 1 400); do
    st=$(q "SELECT state FROM ldpsql_catalog.ldp_jobs WHERE id = $1")
    [ "$st" != "running" ] && break; sleep 5
  done
  echo "job $1: $st $(q "SELECT error FROM ldpsql_catalog.ldp_jobs WHERE id = $1")"
}
for v in "c8:{\"d\":8,\"l\":10,\"image_shape\":[28,28],\"epochs\":20,\"seed\":1}" "c32e20:{\"d\":32,\"l\":5,\"image_shape\":[28,28],\"epochs\":20,\"seed\":1}"; do
  name=${v%%:*}; params=${v#*:}
  echo "== $name $params $(date +%T)"
  id=$(q "CALL ldp_train_mechanism('$name', 'clm', 't1_d1', 'features', '$params')"); wait_job $id
  q "CALL ldp_privatize('t1_d2', 'features', 'label', '${name}_d2', 10, 0.7, '$name', 'laplace', 10)"
  id=$(q "SELECT TRAIN_NOISY_CLASSIFIER('${name}_d2', '{\"model\":\"${name}_clf\",\"objective\":\"marginal\",\"seed\":1,\"epochs\":60,\"aux_table\":\"t1_d1\",\"batch_size\":512,\"lr\":0.002}')"); wait_job $id
  echo "$name accuracy: $(q "SELECT AVG(CASE WHEN PREDICT('${name}_clf', features) = label THEN 1.0 ELSE 0.0 END) FROM fmnist_test") $(date +%T)"
done
kill $SP
