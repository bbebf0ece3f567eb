// Package ldpv1 is the gRPC protocol (version 1) between the ldpsql host and its
// encoder plugins: encoder.proto and the code protoc generates from it, which is
// committed so that building a plugin needs no protoc.
//
// To regenerate (protoc 3.21+, the plugins at the versions below):
//
//	apt-get install -y protobuf-compiler
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
//	go generate ./plugins/proto/ldpv1
package ldpv1

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative encoder.proto

// ProtocolVersion is the version of this protocol. It is the go-plugin handshake
// ProtocolVersion and must be reported in Description.protocol_version.
const ProtocolVersion = 1
