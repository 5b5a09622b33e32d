# certs.bash - certificates for the TLS tests, made by openssl.
#
# make_certs DIR   writes into DIR: a CA (ca.crt, ca.key); a server
#                  certificate it signed for 127.0.0.1 and localhost
#                  (server.crt, server.key; good for client auth too:
#                  etcd's JSON gateway connects to its own gRPC port with
#                  it); one for another name only, wrong.example
#                  (wrong.crt, wrong.key); a client certificate
#                  (client.crt, client.key); and another CA that signed
#                  nothing of ours (other.crt, other.key).

# cert_sign DIR NAME SAN USAGE: NAME.key and NAME.crt, signed by DIR's CA.
cert_sign() {
	local d=$1 n=$2
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$d/$n.key" -out "$d/$n.csr" -subj "/CN=$n" 2>/dev/null
	printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "$3" "$4" >"$d/$n.ext"
	openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
		-CAcreateserial -out "$d/$n.crt" -days 2 -extfile "$d/$n.ext" 2>/dev/null
}

make_certs() {
	local d=$1 ca
	for ca in ca other; do
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
			-nodes -keyout "$d/$ca.key" -out "$d/$ca.crt" \
			-subj "/CN=leaserun-test-$ca" -days 2 2>/dev/null
	done
	cert_sign "$d" server IP:127.0.0.1,DNS:localhost serverAuth,clientAuth
	cert_sign "$d" wrong DNS:wrong.example serverAuth
	cert_sign "$d" client IP:127.0.0.1 clientAuth
}
