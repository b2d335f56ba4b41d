package sync

import (
	"sort"

	"github.com/etcdhook/etcdhook/api"
)

// tlsSecretNames are the user's TLS Secrets a parent names (sorted, distinct): related objects, read by
// name so that the hook sees no other Secret. Read from the spec as sent, defaults applied. Named ones
// are related with TLS off too: a switch off keeps them (TLSSecretChange) and its transition template
// still mounts them, so /sync checks them until the switch is over (secretsToCheck).
func tlsSecretNames(p *api.EtcdCluster) []string {
	t := api.Defaulted(p.Spec).Security.TLS
	seen := map[string]bool{}
	var out []string
	for _, n := range []string{t.Peer.SecretName, t.Client.SecretName} {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
