#!/usr/bin/env bash
# The cluster's PKI (one CA), made once per cluster under $PKI (an existing
# set is kept, so a second cluster-up changes nothing), and the admin kubeconfig.
set -euo pipefail
source "$(dirname "$0")/env.sh"

mkdir -p "$PKI"
cd "$PKI"
if [ ! -f ./done ]; then
openssl genrsa -out ca.key 2048 2>/dev/null
openssl req -x509 -new -key ca.key -subj /CN=kc-ca -days 3650 -out ca.crt

# cert NAME SUBJECT [SANS]: a key and a certificate signed by the CA.
cert() {
  local ext=
  openssl genrsa -out "$1.key" 2048 2>/dev/null
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  if [ -n "${3:-}" ]; then ext=$1.ext; printf 'subjectAltName=%s\n' "$3" >"$ext"; fi
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    ${ext:+-extfile "$ext"} -out "$1.crt" 2>/dev/null
  rm -f "$1.csr"
}
cert apiserver /CN=kube-apiserver \
  "IP:$NODE_IP,IP:$API_SVC_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=kc-admin"
# The aggregation layer's front proxy (for Prometheus Adapter's APIService).
cert front-proxy /CN=front-proxy-client
# Service-account tokens (and their OIDC discovery).
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
touch ./done
fi

kubeconfig() {
  cat <<KC
apiVersion: v1
kind: Config
clusters:
- name: kc
  cluster:
    server: https://$NODE_IP:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: kc
  context: {cluster: kc, user: admin}
current-context: kc
KC
}
kubeconfig >"$KUBECONFIG_FILE"
