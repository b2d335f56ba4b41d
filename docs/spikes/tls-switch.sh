#!/bin/bash
# Spike (manual, not a test; docs/design/14-tls.md §14.8): switch a running plaintext 3-member etcd cluster to TLS
# on both planes, one member at a time, the client plane serving both schemes on one port meanwhile.
# Run: ETCD=<an etcd binary, e.g. the membership tests build> bash docs/spikes/tls-switch.sh
set -u
ETCD=${ETCD:-$HOME/.cache/etcdhook/etcd-v3.6.16-6a595304cc33}
D=${TMPDIR:-/tmp}/tls-switch-spike; rm -rf "$D"; mkdir -p "$D"; cd "$D" || exit 1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt -days 1 -subj /CN=ca 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout m.key -out m.csr -subj /CN=m 2>/dev/null
printf "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n" > ext
openssl x509 -req -in m.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out m.crt -days 1 -extfile ext 2>/dev/null
C=(23790 23791 23792); P=(23800 23801 23802)
pids=()
cluster="m0=http://127.0.0.1:${P[0]},m1=http://127.0.0.1:${P[1]},m2=http://127.0.0.1:${P[2]}"
start() { # i mode(plain|trans|tls) peerScheme
  i=$1; mode=$2; ps=$3
  args=(--name m$i --data-dir $D/m$i --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token spike
        --initial-advertise-peer-urls http://127.0.0.1:${P[$i]} --listen-peer-urls $ps://127.0.0.1:${P[$i]})
  case $mode in
    plain) args+=(--listen-client-urls http://127.0.0.1:${C[$i]} --advertise-client-urls http://127.0.0.1:${C[$i]});;
    trans) args+=(--listen-client-urls http://127.0.0.1:${C[$i]},https://127.0.0.1:${C[$i]} --advertise-client-urls http://127.0.0.1:${C[$i]}
                  --cert-file m.crt --key-file m.key --trusted-ca-file ca.crt
                  --peer-cert-file m.crt --peer-key-file m.key --peer-trusted-ca-file ca.crt --peer-client-cert-auth);;
    tls)   args+=(--listen-client-urls https://127.0.0.1:${C[$i]} --advertise-client-urls https://127.0.0.1:${C[$i]}
                  --cert-file m.crt --key-file m.key --trusted-ca-file ca.crt --client-cert-auth
                  --peer-cert-file m.crt --peer-key-file m.key --peer-trusted-ca-file ca.crt --peer-client-cert-auth);;
  esac
  $ETCD "${args[@]}" >> $D/m$i.log 2>&1 &
  pids[$i]=$!
}
stopm() { kill ${pids[$1]}; wait ${pids[$1]} 2>/dev/null; }
put() { # endpoint-url key
  curl -s --max-time 3 --cacert ca.crt --cert m.crt --key m.key -X POST $1/v3/kv/put -d "{\"key\":\"$(echo -n $2|base64)\",\"value\":\"$(echo -n v|base64)\"}" | grep -q revision && echo ok || echo FAIL
}
health() { curl -s --max-time 3 --cacert ca.crt --cert m.crt --key m.key $1/health; echo; }
members() { curl -s --max-time 3 --cacert ca.crt --cert m.crt --key m.key -X POST http://127.0.0.1:${C[0]}/v3/cluster/member/list -d '{}' 2>/dev/null || curl -s --max-time 3 --cacert ca.crt --cert m.crt --key m.key -X POST https://127.0.0.1:${C[0]}/v3/cluster/member/list -d '{}'; echo; }
for i in 0 1 2; do start $i plain http; done
sleep 4
echo "== plaintext: put $(put http://127.0.0.1:${C[0]} a)"
echo "== phase A: roll to the transition template (client both schemes on one port, peer TLS files, peer still http)"
for i in 0 1 2; do stopm $i; start $i trans http; sleep 3; echo "  m$i http $(health http://127.0.0.1:${C[$i]}) https $(health https://127.0.0.1:${C[$i]})"; done
echo "  put over http $(put http://127.0.0.1:${C[1]} b), over https $(put https://127.0.0.1:${C[2]} c)"
echo "== phase B: one member at a time: stop, member update own peer URL to https through another, start listening TLS"
ids=$(members | python3 -c 'import json,sys; print(" ".join(m["ID"] for m in sorted(json.load(sys.stdin)["members"], key=lambda m: m["name"])))')
set -- $ids
idarr=($ids)
for i in 1 2 0; do
  other=$(( (i+1) % 3 ))
  stopm $i
  out=$(curl -s --max-time 5 -X POST http://127.0.0.1:${C[$other]}/v3/cluster/member/update -d "{\"ID\":\"${idarr[$i]}\",\"peerURLs\":[\"https://127.0.0.1:${P[$i]}\"]}")
  start $i trans https; sleep 3
  echo "  m$i updated ($out) health $(health http://127.0.0.1:${C[$i]}) put $(put http://127.0.0.1:${C[$other]} k$i)"
done
members | python3 -c 'import json,sys; [print("  ", m["name"], m["peerURLs"]) for m in json.load(sys.stdin)["members"]]'
echo "== phase C: roll to the TLS template"
for i in 0 1 2; do stopm $i; start $i tls https; sleep 3; echo "  m$i https $(health https://127.0.0.1:${C[$i]})"; done
echo "  put over https $(put https://127.0.0.1:${C[1]} d); http refused: $(curl -s --max-time 2 http://127.0.0.1:${C[1]}/health || echo refused)"
for i in 0 1 2; do stopm $i; done
grep -h -i 'rejected\|error' $D/m*.log | grep -v 'lost TCP streaming\|failed to read\|peer became inactive\|failed to dial\|connection refused\|EOF' | head -5
