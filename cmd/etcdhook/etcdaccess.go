package main

import (
	"flag"
	"log/slog"

	"github.com/etcdhook/etcdhook/membership"
)

// etcdAccess is how a command that calls etcd identifies itself: the client certificate directory and,
// when etcd does not require client certificates under spec.auth, root's password to log in with
// (docs/design/20-auth.md §20.2).
type etcdAccess struct{ tlsDir, passwordFile *string }

func etcdAccessFlags(fs *flag.FlagSet) etcdAccess {
	return etcdAccess{
		tlsDir:       fs.String("tls-dir", "", "client certificate directory (tls.crt, tls.key, ca.crt) when the cluster runs TLS"),
		passwordFile: fs.String("password-file", "", "root's password, to log in with when etcd does not require client certificates"),
	}
}

func (a etcdAccess) etcd(log *slog.Logger) *membership.Etcd {
	e := &membership.Etcd{Log: log, TLSDir: *a.tlsDir}
	if *a.passwordFile != "" {
		e.Login = membership.PasswordFile(*a.passwordFile)
	}
	return e
}
