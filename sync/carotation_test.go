package sync

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// worldCA is the fingerprint of the CA every world cluster starts with.
const worldCA = "3f1a9c0e5b7d2468ace13579bdf02468ace13579bdf02468ace13579bdf02468"

// simCA is the CA Secret and, per pod (by UID), the CAs its etcd was started trusting and the CA that
// signed its certificate: the agents' half of a CA rotation (membership/carotation.go), as the world sees it.
type simCA struct {
	secret    api.CASecretState
	trust     map[string]string
	issuer    map[string]string
	restarted map[string]bool // the pod's etcd is restarting at this step
	restarts  int
	notAfter  map[string]time.Time // each CA's expiry (5 years after it was made)
}

// caAgent is what an agent does with the rotation asked on its Lease, and what it reports.
func (w *world) caAgent(i int, ann map[string]any, r *api.Report) {
	c := &w.ca
	if c.secret.Current == "" {
		c.secret.Current = worldCA
		c.trust, c.issuer, c.restarted = map[string]string{}, map[string]string{}, map[string]bool{}
		c.notAfter = map[string]time.Time{worldCA: fixtureNow.Add(5 * 365 * 24 * time.Hour)}
	}
	uid := w.pods[i].uid
	if _, ok := c.trust[uid]; !ok {
		c.trust[uid] = c.secret.Trust() // a new pod starts on what the Secret lists
	}
	rot, _ := api.ParseCARotation(stringOf(ann[api.AnnCARotation]))
	restart := stringOf(ann[api.AnnCARestart])
	if rot.Phase == api.CAPhaseTrust && c.secret.Next == "" && c.secret.CurrentMark != rot.Mark {
		h := sha256.Sum256([]byte("ca " + rot.Mark + " " + c.secret.Current))
		c.secret.Next, c.secret.NextMark, c.secret.NextCarry = hex.EncodeToString(h[:]), rot.Mark, rot.Carry
		c.notAfter[c.secret.Next] = w.now.Add(5 * 365 * 24 * time.Hour)
	}
	switch {
	case c.restarted[uid]:
		c.restarted[uid] = false
		c.trust[uid] = c.secret.Trust()
	case restart != "" && restart == c.secret.Trust() && c.trust[uid] != restart:
		c.restarted[uid] = true
		c.restarts++
	}
	trusts := func(fp string) bool {
		for _, t := range splitList(c.trust[uid]) {
			if t == fp {
				return true
			}
		}
		return false
	}
	signer := c.secret.Current
	if c.secret.Next != "" && c.secret.NextMark == rot.Mark && (rot.Phase == api.CAPhaseSign || rot.Phase == api.CAPhaseDrop) && trusts(c.secret.Next) {
		signer = c.secret.Next
	}
	if trusts(signer) {
		c.issuer[uid] = signer
	}
	if rot.Phase == api.CAPhaseDrop && c.secret.Next != "" && c.issuer[uid] == c.secret.Next {
		c.secret = api.CASecretState{Current: c.secret.Next, CurrentMark: c.secret.NextMark, CurrentCarry: c.secret.NextCarry}
	}
	r.TLSCAs, r.TLSIssuer, r.TLSCASecret = c.trust[uid], c.issuer[uid], c.secret.String()
	var earliest time.Time
	for _, fp := range splitList(c.trust[uid]) {
		if t := c.notAfter[fp]; earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	r.TLSCANotAfter = earliest.UTC().Format(time.RFC3339)
	if c.restarted[uid] {
		// etcd is down while it restarts: the agent reports what it keeps, unhealthy.
		r.Healthy, r.Role, r.Members, r.LeaderID = false, api.RoleNone, nil, ""
		r.Error = api.ReasonRestartingForCA + ": restarting etcd to trust the CAs of the CA Secret"
	}
}

func stringOf(v any) string { s, _ := v.(string); return s }

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// caRestartsAsked lists, per Lease, the etcd.io/ca-restart the hook wrote ("" none).
func (w *world) caRestartsAsked() []string {
	var out []string
	for _, i := range sortedKeys(w.leases) {
		out = append(out, stringOf(w.leaseIntent(i)[api.AnnCARestart]))
	}
	return out
}

// etcd.io/rotate-ca (docs/design/14-tls.md §14.6): the new CA is made, every member restarts once to trust
// both (never two at a time), everything is reissued from the new CA, the old one is dropped and every
// member restarts again to trust the new one alone; no roll, no membership change, no Degraded.
func TestRotateCA(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	sts := string(mustJSON(w.desired[wire.KeyStatefulSet]))
	members := len(w.etcd.members)
	w.parentAnn = map[string]string{api.AnnRotateCA: "ca-2027"}
	mark := api.RenewalMark("ca-2027")
	phases := map[string]bool{}
	for step := 0; step < 80; step++ {
		w.step(5e9)
		asked := 0
		for _, v := range w.caRestartsAsked() {
			if v != "" {
				asked++
			}
		}
		require.LessOrEqual(t, asked, 1, "one member restarts at a time (step %d)", step)
		if rot := w.status.TLS.CARotation; rot != nil {
			phases[rot.Phase] = true
			if rot.Phase == api.CARotationDone {
				break
			}
		}
		for _, c := range w.status.Conditions {
			if c.Type == api.CondDegraded {
				require.Equal(t, "False", string(c.Status), "a restart asked for is not a degradation: %s", c.Message)
			}
			if c.Type == api.CondCertificatesInvalid {
				t.Fatalf("members trusting different CAs during a rotation are not invalid: %s", c.Message)
			}
		}
	}
	require.Equal(t, &api.CARotation{Request: "ca-2027", Phase: api.CARotationDone, Members: 3, Trusting: 3, Issued: 3}, w.status.TLS.CARotation)
	require.Equal(t, map[string]bool{api.CARotationAddingCA: true, api.CARotationReissuing: true, api.CARotationDroppingCA: true, api.CARotationDone: true}, phases)
	require.Equal(t, mark, w.ca.secret.CurrentMark)
	require.Empty(t, w.ca.secret.Next)
	require.Equal(t, 6, w.ca.restarts, "each member restarted twice: to trust both CAs, then the new one alone")
	for _, uid := range []string{w.pods[0].uid, w.pods[1].uid, w.pods[2].uid} {
		require.Equal(t, w.ca.secret.Current, w.ca.trust[uid])
		require.Equal(t, w.ca.secret.Current, w.ca.issuer[uid])
	}
	require.Equal(t, sts, string(mustJSON(w.desired[wire.KeyStatefulSet])), "no roll: the agents restart etcd in place")
	require.Len(t, w.etcd.members, members)
	require.Equal(t, []string{"", "", ""}, w.caRestartsAsked())

	// The request stays: nothing more happens. Withdrawn: the status goes.
	w.converge(20)
	require.Equal(t, 6, w.ca.restarts)
	w.parentAnn = nil
	w.converge(10)
	require.Nil(t, w.status.TLS.CARotation)
	require.Equal(t, 6, w.ca.restarts)
}

// A rotation's restart waits for every member to be healthy, and no restart is asked while a member is
// down; the step resumes when it is back.
func TestRotateCAWaitsForHealthyMembers(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRotateCA: "ca-2027"}
	w.step(5e9)
	w.step(5e9)
	require.NotEmpty(t, w.ca.secret.Next, "an agent made the new CA")
	w.down[2] = true
	for step := 0; step < 10; step++ {
		w.step(5e9)
	}
	restarts := w.ca.restarts
	for step := 0; step < 10; step++ {
		w.step(5e9)
		require.Equal(t, []string{"", "", ""}, w.caRestartsAsked(), "no restart beside a member that is down")
	}
	require.Equal(t, restarts, w.ca.restarts)
	require.Equal(t, api.CARotationAddingCA, w.status.TLS.CARotation.Phase)
	w.down[2] = false
	for step := 0; step < 80 && w.status.TLS.CARotation.Phase != api.CARotationDone; step++ {
		w.step(5e9)
	}
	require.Equal(t, api.CARotationDone, w.status.TLS.CARotation.Phase)
	require.Equal(t, 6, w.ca.restarts)
}

// With both planes on the user's Secrets there is no built-in CA: the request asks nothing.
func TestRotateCAUserSecrets(t *testing.T) {
	w := askedOnUserSecrets(t, api.AnnRotateCA, "ca-2027")
	require.Equal(t, []string{"", "", ""}, w.caRestartsAsked())
	require.Nil(t, w.status.TLS.CARotation)
}

// askedOnUserSecrets settles a cluster whose both planes are on the user's Secrets, then sets the
// parent annotation ann to value and lets ten syncs pass (TestRotateCAUserSecrets,
// TestRenewCertificatesUserSecrets: the built-in CA's requests are not for them).
func askedOnUserSecrets(t *testing.T, ann, value string) *world {
	w := newWorld(t, 3)
	useSecrets(w, "peer", "client")
	w.converge(60)
	w.parentAnn = map[string]string{ann: value}
	w.converge(10)
	return w
}

// caPhase is the rotation phase in the world's status ("" none).
func caPhase(w *world) string {
	if w.status.TLS == nil || w.status.TLS.CARotation == nil {
		return ""
	}
	return w.status.TLS.CARotation.Phase
}

// stepUntil steps the world until cond holds, failing after 100 steps.
func stepUntil(w *world, cond func() bool) {
	w.t.Helper()
	for n := 0; n < 100; n++ {
		if cond() {
			return
		}
		w.step(5 * time.Second)
	}
	w.t.Fatalf("condition not reached in 100 steps")
}

// One plane on the user's Secret: the built-in CA is not rotated, and the request is named as ignored.
func TestRotateCAMixedPlanes(t *testing.T) {
	w := newWorld(t, 3)
	useSecrets(w, "peer", "client")
	w.spec.Security.TLS.Peer.SecretName = "" // the peer plane on the built-in CA
	delete(w.secrets, "etcd-peer")
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRotateCA: "ca-2027"}
	w.converge(10)
	require.Equal(t, []string{"", "", ""}, w.caRestartsAsked())
	require.Nil(t, w.status.TLS.CARotation)
	msg := ""
	for _, c := range w.status.Conditions {
		if c.Type == api.CondInputIgnored {
			msg = c.Message
		}
	}
	require.Contains(t, msg, "etcd.io/rotate-ca")
}

// A request left in place after its rotation does not stop the rotation that comes with the CA's age.
func TestRotateCAAutoAfterARequest(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRotateCA: "ca-2027"}
	stepUntil(w, func() bool { return caPhase(w) == api.CARotationDone })
	restarts := w.ca.restarts
	rotated := w.ca.secret.Current
	// The CA (5 years) is past 2/3 of its lifetime.
	w.now = w.now.Add(4 * 365 * 24 * time.Hour)
	stepUntil(w, func() bool { return w.ca.secret.Current != rotated && caPhase(w) == api.CARotationDone })
	require.Equal(t, restarts+6, w.ca.restarts)
	require.Equal(t, api.RenewalMark("auto "+rotated), w.ca.secret.CurrentMark)
	require.Equal(t, api.RenewalMark("ca-2027"), w.ca.secret.CurrentCarry, "the request left in place is carried")
	require.Equal(t, "ca-2027", w.status.TLS.CARotation.Request)
	// Served still: nothing more.
	w.converge(30)
	require.Equal(t, restarts+6, w.ca.restarts)
}
