package sync

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

func (w *world) renewalMarks() []string {
	var out []string
	for _, i := range sortedKeys(w.leases) {
		mark, _ := w.leaseIntent(i)[api.AnnRenewal].(string)
		out = append(out, mark)
	}
	return out
}

// etcd.io/renew-certificates (docs/design/14-tls.md §14.7): every member Lease asks for the mark, status counts
// the members that serve it; withdrawn, nothing is asked.
func TestRenewCertificates(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	before := string(mustJSON(w.desired[wire.KeyStatefulSet]))
	w.parentAnn = map[string]string{api.AnnRenewCertificates: " leak-1 "}
	w.step(5e9)
	mark := api.RenewalMark("leak-1")
	require.Equal(t, []string{mark, mark, mark}, w.renewalMarks())
	w.converge(10)
	require.Equal(t, &api.CertRenewal{Request: "leak-1", Members: 3, Renewed: 3}, w.status.TLS.Renewal)
	require.Equal(t, before, string(mustJSON(w.desired[wire.KeyStatefulSet])), "no roll: etcd reads renewed files for new handshakes")

	w.parentAnn = nil
	w.converge(10)
	require.Equal(t, []string{"", "", ""}, w.renewalMarks())
	require.Nil(t, w.status.TLS.Renewal)
}

// The user's Secrets are renewed by their issuer (cert-manager): nothing is asked of the agents.
func TestRenewCertificatesUserSecrets(t *testing.T) {
	w := askedOnUserSecrets(t, api.AnnRenewCertificates, "leak-1")
	require.Equal(t, []string{"", "", ""}, w.renewalMarks())
	require.Nil(t, w.status.TLS.Renewal)
}
