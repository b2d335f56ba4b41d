// Command etcd is the etcd server built from its Go module, for the membership tests (real etcd,
// never a fake). A separate module per version keeps the server's dependencies out of etcdhook's.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
