package membership

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// served is the serial of the certificate a member presents to a new connection on url (client or
// peer port), dialled with the cluster's client certificate.
func (c *tcluster) served(rawURL string) (*big.Int, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	tc, err := ClientTLS(c.clientTLS())
	if err != nil {
		return nil, err
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", u.Host, tc)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// mustServed is served, dialled again while the dial times out (a loaded machine: no answer, not a
// wrong one); any other error, a certificate refused among them, fails at once.
func (c *tcluster) mustServed(rawURL string) *big.Int {
	c.t.Helper()
	var sn *big.Int
	var err error
	c.waitFor("a TLS answer at "+rawURL, stepMax, func() bool {
		sn, err = c.served(rawURL)
		return !timedOut(err)
	})
	require.NoError(c.t, err, "dialling %s", rawURL)
	return sn
}

// servedBy is what a member's etcd was: its process and the serials of the certificates it served on
// the client and the peer plane (peer nil: not looked at).
type servedBy struct {
	pid          int
	client, peer *big.Int
}

// servesRenewed says whether slot i serves a certificate other than before's on the client plane and,
// where before has one, on the peer plane.
func (c *tcluster) servesRenewed(i int, before servedBy) bool {
	s := c.slots[i]
	if cs, err := c.served(s.clientURL); err != nil || cs.Cmp(before.client) == 0 {
		return false
	}
	if before.peer == nil {
		return true
	}
	ps, err := c.served(s.peerURL)
	return err == nil && ps.Cmp(before.peer) != 0
}

// requireNotRestarted requires that each member's etcd is still the process of before: certificates
// renewed without a restart.
func (c *tcluster) requireNotRestarted(before map[int]servedBy) {
	c.t.Helper()
	for i, s := range c.slots {
		require.Equal(c.t, before[i].pid, s.etcdPID(), "etcd of %s was not restarted", s.name)
	}
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *slot) etcdPID() int {
	s.agent.proc.mu.Lock()
	defer s.agent.proc.mu.Unlock()
	return s.agent.proc.pid
}

// Leaf rotation under a continuous writer (docs/design/14-tls.md §14.3): the agents renew their member
// certificates at 2/3 of the lifetime and etcd serves the new certificate on both planes from the next
// handshake on, without a restart (the same etcd process) and without a lost acknowledged write. This
// is the per-version evidence that etcd reads its certificate files again for new connections.
func TestMembershipTLSLeafRotation(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newCluster(t, v, 3)
		// The agents' certificate clock runs 2 h behind while the cluster is made, then catches up: the
		// certificates (3 h, made 2 h "ago") are then past 2/3 of their lifetime, and the renewed ones are
		// valid by the real clock (a clock shifted forward would issue certificates not yet valid).
		c.certShift.Store(int64(-2 * time.Hour))
		var w *twriter
		c.bootstrap(&w, 3)
		before := map[int]servedBy{}
		for i, s := range c.slots {
			cs, ps := c.mustServed(s.clientURL), c.mustServed(s.peerURL)
			require.Equal(t, cs, ps, "one member certificate serves both planes")
			before[i] = servedBy{pid: s.etcdPID(), client: cs, peer: ps}
		}
		clientBefore, _, _, _ := c.secrets.Get(context.Background(), "m-client-tls")

		w.Step("leaf rotation")
		c.certShift.Store(0)
		took := c.waitFor("every member to serve a renewed certificate on both planes", stepMax, func() bool {
			for i := range c.slots {
				if !c.servesRenewed(i, before[i]) {
					return false
				}
			}
			return true
		})
		t.Logf("renewed certificates served after %s", took)
		c.requireNotRestarted(before)
		clientAfter, _, _, _ := c.secrets.Get(context.Background(), "m-client-tls")
		require.NotEqual(t, clientBefore[pki.KeyCert], clientAfter[pki.KeyCert], "the client certificate was renewed too")
		// The reports carry the new expiry.
		c.waitFor("the reports to carry the renewed expiry", stepMax, func() bool {
			for _, s := range c.slots {
				r := c.leases.Report(s.lease)
				na, err := time.Parse(time.RFC3339, r.TLSCertNotAfter)
				if err != nil || !na.After(time.Now().Add(2*time.Hour+30*time.Minute)) {
					return false
				}
			}
			return true
		})

		// etcd.io/renew-certificates: the hook puts its mark on every member Lease; each agent renews at
		// once (not at its next minute's look), again without restarting etcd.
		w.Step("renewal asked")
		for i, s := range c.slots {
			before[i] = servedBy{pid: s.etcdPID(), client: c.mustServed(s.clientURL)}
		}
		mark := api.RenewalMark("e2e-renewal-1")
		for _, s := range c.slots {
			c.leases.SetRenewal(s.lease, mark)
		}
		took = c.waitFor("every member to serve and report a certificate renewed for the mark", stepMax, func() bool {
			for i, s := range c.slots {
				if !c.servesRenewed(i, before[i]) || c.leases.Report(s.lease).TLSRenewal != mark {
					return false
				}
			}
			return true
		})
		t.Logf("renewal asked: served by every member after %s", took)
		c.requireNotRestarted(before)
		renewed, _, _, _ := c.secrets.Get(context.Background(), "m-client-tls")
		leaf, err := pki.ParseCertificates(renewed[pki.KeyCert])
		require.NoError(t, err)
		require.Equal(t, mark, pki.RenewalOf(leaf[0]), "the client Secret was renewed for the mark too")
		// A few more writes on the renewed certificates, then every acknowledged write must be there.
		w.Step("after the renewal")
		c.waitFor("writes on the renewed certificates", stepMax, func() bool { return w.AckedInStep() >= 5 })
		w.Verify(t)
	})
}

// The plaintext path stays: a cluster created before TLS existed keeps running and changing size
// without it.
func TestMembershipPlaintext(t *testing.T) {
	c := newPlainCluster(t, newestEtcd, 3)
	var w *twriter
	c.bootstrap(&w, 3)
	require.Empty(t, c.leases.Report(c.slots[0].lease).TLSCAs, "no certificates reported without TLS")
	w.Verify(t)
}

// racySecrets fails the first create of one Secret after it is done, as a crash right after the API
// server stored it would look to the agent that sent it.
type racySecrets struct {
	*MemSecrets
	failAfter string
	once      sync.Once
}

func (r *racySecrets) Create(ctx context.Context, name string, data map[string][]byte) error {
	err := r.MemSecrets.Create(ctx, name, data)
	if name == r.failAfter && err == nil {
		fail := false
		r.once.Do(func() { fail = true })
		if fail {
			return errors.New("connection reset after the create was stored")
		}
	}
	return err
}

// Where the randomness lives: however many agents race, and whatever fails between "CA created" and the
// rest, every member ends up with files signed by the one CA in the Secret.
func TestCertsOneCA(t *testing.T) {
	store := &racySecrets{MemSecrets: NewMemSecrets(), failAfter: "x-ca"}
	certs := func(i int) *Certs {
		return &Certs{Store: store, CASecret: "x-ca", ClientSecret: "x-client-tls", CADuration: 24 * time.Hour, CertDuration: 3 * time.Hour,
			PeerDir: t.TempDir(), ClientDir: t.TempDir(), CommonName: "m", DNSNames: []string{"localhost"}}
	}
	const n = 8
	facts := make([]CertFacts, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			facts[i], errs[i] = certs(i).Ensure(context.Background())
		}(i)
	}
	wg.Wait()
	data, _, found, _ := store.Get(context.Background(), "x-ca")
	require.True(t, found)
	cas, err := pki.ParseCertificates(data[pki.KeyCert])
	require.NoError(t, err)
	want := pki.Fingerprint(cas[0])
	failed := 0
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			// The agent whose create "failed" retries on its next look and finds the stored CA.
			failed++
			facts[i], errs[i] = certs(i).Ensure(context.Background())
		}
		require.NoError(t, errs[i])
		require.Equal(t, []string{want}, facts[i].CAs, "agent %d trusts the one CA", i)
	}
	require.LessOrEqual(t, failed, 1)

	// A CA Secret that is there but unusable is reported, never replaced: the members trust it.
	store2 := NewMemSecrets()
	require.NoError(t, store2.Create(context.Background(), "y-ca", map[string][]byte{pki.KeyCert: []byte("garbage"), pki.KeyKey: []byte("x")}))
	c := &Certs{Store: store2, CASecret: "y-ca", ClientSecret: "y-client-tls", CADuration: time.Hour * 24, CertDuration: time.Hour, PeerDir: t.TempDir(), ClientDir: t.TempDir()}
	_, err = c.Ensure(context.Background())
	require.ErrorContains(t, err, "y-ca")
	after, _, _, _ := store2.Get(context.Background(), "y-ca")
	require.Equal(t, []byte("garbage"), after[pki.KeyCert])
}

// A renewal keeps the pod's key (no mismatched pair for a handshake that reads across the swap); a
// certificate from another CA, or one missing a name, is replaced.
func TestCertsRenewal(t *testing.T) {
	store := NewMemSecrets()
	now := time.Now()
	clock := func() time.Time { return now }
	c := &Certs{Store: store, CASecret: "z-ca", ClientSecret: "z-client-tls", CADuration: 24 * time.Hour, CertDuration: 3 * time.Hour,
		PeerDir: t.TempDir(), ClientDir: t.TempDir(), CommonName: "m", DNSNames: []string{"localhost"}, Now: clock}
	f1, err := c.Ensure(context.Background())
	require.NoError(t, err)
	files1, err := pki.ReadFiles(c.PeerDir, pki.KeyCert, pki.KeyKey)
	require.NoError(t, err)

	f2, err := c.Ensure(context.Background())
	require.NoError(t, err)
	files2, _ := pki.ReadFiles(c.PeerDir, pki.KeyCert, pki.KeyKey)
	require.Equal(t, files1[pki.KeyCert], files2[pki.KeyCert], "nothing due: the files stay")
	require.Equal(t, f1, f2)

	now = now.Add(2*time.Hour + time.Minute)
	f3, err := c.Ensure(context.Background())
	require.NoError(t, err)
	files3, _ := pki.ReadFiles(c.PeerDir, pki.KeyCert, pki.KeyKey)
	require.NotEqual(t, files1[pki.KeyCert], files3[pki.KeyCert], "due at 2/3: renewed")
	require.Equal(t, files1[pki.KeyKey], files3[pki.KeyKey], "a renewal keeps the key")
	require.True(t, f3.CertNotAfter.After(f1.CertNotAfter))

	c.DNSNames = append(c.DNSNames, "new.name")
	_, err = c.Ensure(context.Background())
	require.NoError(t, err)
	files4, _ := pki.ReadFiles(c.PeerDir, pki.KeyCert)
	require.NotEqual(t, files3[pki.KeyCert], files4[pki.KeyCert], "a missing name is a new certificate")

	// A renewal asked (etcd.io/renewal): renewed at once, member and client certificates, once.
	client4, _, _, _ := store.Get(context.Background(), "z-client-tls")
	c.Renewal = api.RenewalMark("leak-2026-11-24")
	f5, err := c.Ensure(context.Background())
	require.NoError(t, err)
	files5, _ := pki.ReadFiles(c.PeerDir, pki.KeyCert, pki.KeyKey)
	require.NotEqual(t, files4[pki.KeyCert], files5[pki.KeyCert], "renewed for the mark before it was due")
	require.Equal(t, files1[pki.KeyKey], files5[pki.KeyKey], "the member keeps its key (etcd reads the two files separately)")
	require.Equal(t, c.Renewal, f5.Renewal, "the report carries the mark")
	client5, _, _, _ := store.Get(context.Background(), "z-client-tls")
	require.NotEqual(t, client4[pki.KeyCert], client5[pki.KeyCert], "the client Secret is renewed too")
	_, err = c.Ensure(context.Background())
	require.NoError(t, err)
	files6, _ := pki.ReadFiles(c.PeerDir, pki.KeyCert)
	require.Equal(t, files5[pki.KeyCert], files6[pki.KeyCert], "once per mark")
}

// etcd reads its trusted CAs only at start: once a member runs, files trusting another CA are refused
// and the files in use stay, whether the CA Secret is deleted (no new CA is made), replaced, or a user's
// Secret now carries another CA.
func TestCertsKeepTheCAEtcdRuns(t *testing.T) {
	store := NewMemSecrets()
	c := &Certs{Store: store, CASecret: "k-ca", ClientSecret: "k-client-tls", CADuration: 24 * time.Hour, CertDuration: 3 * time.Hour,
		PeerDir: t.TempDir(), ClientDir: t.TempDir(), CommonName: "m", DNSNames: []string{"localhost"}}
	first, err := c.Ensure(context.Background())
	require.NoError(t, err)
	c.Pin() // etcd started on these files
	files, _ := pki.ReadFiles(c.PeerDir, pki.KeyCert, pki.KeyCA)

	store.Delete("k-ca")
	_, err = c.Ensure(context.Background())
	require.ErrorContains(t, err, "is missing")
	_, _, found, _ := store.Get(context.Background(), "k-ca")
	require.False(t, found, "no new CA is made under a running member")

	other, err := pki.NewCA("other", time.Now(), 24*time.Hour)
	require.NoError(t, err)
	require.NoError(t, store.Create(context.Background(), "k-ca", map[string][]byte{pki.KeyCert: other.CertPEM, pki.KeyKey: other.KeyPEM, pki.KeyCA: other.CertPEM}))
	after, err := c.Ensure(context.Background())
	require.ErrorIs(t, err, ErrCAChanged)
	require.Equal(t, pki.Fingerprint(other.Cert), after.Secret.Current, "the report says what the Secret holds now")
	after.Secret = first.Secret
	require.Equal(t, first, after, "the files in use are reported, unchanged")
	now, _ := pki.ReadFiles(c.PeerDir, pki.KeyCert, pki.KeyCA)
	require.Equal(t, files, now)

	// A member with data never makes a missing CA, even in a fresh process.
	fresh := &Certs{Store: NewMemSecrets(), CASecret: "k-ca", CADuration: time.Hour * 24, CertDuration: time.Hour,
		PeerDir: t.TempDir(), ClientDir: t.TempDir(), MayCreateCA: func() bool { return false }}
	_, err = fresh.Ensure(context.Background())
	require.ErrorContains(t, err, "is missing")

	// A user's Secret whose ca.crt changed under a running member.
	src := t.TempDir()
	caA, _ := pki.NewCA("a", time.Now(), 24*time.Hour)
	caB, _ := pki.NewCA("b", time.Now(), 24*time.Hour)
	leaf := func(ca pki.KeyPair) map[string][]byte {
		kp, err := pki.Issue(ca, pki.LeafRequest{DNSNames: []string{"m0"}, Server: true, Client: true, Lifetime: time.Hour}, time.Now())
		require.NoError(t, err)
		return map[string][]byte{pki.KeyCert: kp.CertPEM, pki.KeyKey: kp.KeyPEM, pki.KeyCA: ca.CertPEM}
	}
	require.NoError(t, pki.WriteFiles(src, leaf(caA)))
	user := &Certs{PeerDir: t.TempDir(), ClientDir: t.TempDir(), PeerSource: src, ClientSource: src,
		PeerNames: []string{"m0"}, ClientNames: []string{"m0"}}
	_, err = user.Ensure(context.Background())
	require.NoError(t, err)
	user.Pin()
	kept, _ := pki.ReadFiles(user.ClientDir, pki.KeyCert)
	require.NoError(t, pki.WriteFiles(src, leaf(caB)))
	_, err = user.Ensure(context.Background())
	require.ErrorIs(t, err, ErrCAChanged)
	still, _ := pki.ReadFiles(user.ClientDir, pki.KeyCert)
	require.Equal(t, kept, still)
	// The same CA renewing the leaf is taken.
	require.NoError(t, pki.WriteFiles(src, leaf(caA)))
	_, err = user.Ensure(context.Background())
	require.NoError(t, err)
	renewed, _ := pki.ReadFiles(user.ClientDir, pki.KeyCert)
	require.NotEqual(t, kept, renewed)
}

// The agents' half of a CA rotation (docs/design/14-tls.md §14.6), three members on one CA Secret: the trust
// step makes one new CA however many agents race, running members keep their files (etcd trusts what
// it started with) until their restart, and a restart is due only when the hook's set matches the
// Secret; the sign step reissues from the new CA only where etcd trusts it; the drop step makes it the
// Secret's only CA; restarted members then trust it alone.
func TestCertsCARotation(t *testing.T) {
	store := NewMemSecrets()
	ctx := context.Background()
	agents := make([]*Certs, 3)
	for i := range agents {
		agents[i] = &Certs{Store: store, CASecret: "r-ca", ClientSecret: "r-client-tls", CADuration: 24 * time.Hour, CertDuration: 3 * time.Hour,
			PeerDir: t.TempDir(), ClientDir: t.TempDir(), CommonName: fmt.Sprintf("m%d", i), DNSNames: []string{"localhost"}}
	}
	ensureAll := func() []CertFacts {
		out := make([]CertFacts, len(agents))
		for i, c := range agents {
			f, err := c.Ensure(ctx)
			require.NoError(t, err, "agent %d", i)
			out[i] = f
		}
		return out
	}
	before := ensureAll()
	for _, c := range agents {
		c.Pin() // etcd started
		c.ClientGrace = time.Millisecond
	}
	old := before[0].Secret.Current
	require.Equal(t, old, before[0].Issuer)
	require.Equal(t, []string{old}, before[0].CAs)
	memberBefore, _ := pki.ReadFiles(agents[1].PeerDir, pki.KeyCert, pki.KeyKey)

	// trust: every agent is asked at once; one new CA.
	mark := api.RenewalMark("ca-2027")
	for _, c := range agents {
		c.Rotation = api.CARotationIntent{Mark: mark, Phase: api.CAPhaseTrust}
	}
	facts := ensureAll()
	next := facts[0].Secret.Next
	require.NotEmpty(t, next)
	require.Equal(t, mark, facts[0].Secret.NextMark)
	for i, f := range facts {
		require.Equal(t, facts[0].Secret, f.Secret, "agent %d sees the one new CA", i)
		require.Equal(t, []string{old}, f.CAs, "agent %d keeps what its etcd trusts until its restart", i)
		require.Equal(t, old, f.Issuer)
		require.False(t, agents[i].RestartDue(), "no restart without the hook's word")
	}
	memberNow, _ := pki.ReadFiles(agents[1].PeerDir, pki.KeyCert, pki.KeyKey)
	require.Equal(t, memberBefore, memberNow, "nothing reissued in the trust step")
	bundle := facts[0].Secret.Trust()
	secret, _, _, _ := store.Get(ctx, "r-ca")
	cas, _ := fingerprintsOf(secret[pki.KeyCA])
	require.Equal(t, bundle, strings.Join(cas, ","), "the Secret's ca.crt lists both")
	client, _, _, _ := store.Get(ctx, "r-client-tls")
	cas, _ = fingerprintsOf(client[pki.KeyCA])
	require.Equal(t, bundle, strings.Join(cas, ","), "clients are handed both CAs")

	// sign asked before a member trusts the new CA: refused, files kept.
	agents[2].Rotation.Phase = api.CAPhaseSign
	_, err := agents[2].Ensure(ctx)
	require.ErrorIs(t, err, ErrCAChanged)
	agents[2].Rotation.Phase = api.CAPhaseTrust

	// A restart permission for another set than the Secret's is no permission.
	agents[0].Restart = old
	require.False(t, agents[0].RestartDue())
	// restartInPlace is member i's restart for the hook's permission restart (the agent stops etcd,
	// Unpin, Ensure, start): it returns the CAs etcd trusts after it.
	restartInPlace := func(i int, restart string) []string {
		c := agents[i]
		c.Restart = restart
		require.True(t, c.RestartDue(), "agent %d", i)
		c.Unpin()
		f, err := c.Ensure(ctx)
		require.NoError(t, err)
		c.Pin()
		return f.CAs
	}
	// Each member restarts.
	for i, c := range agents {
		require.Equal(t, bundle, strings.Join(restartInPlace(i, bundle), ","), "agent %d trusts both after its restart", i)
		require.False(t, c.RestartDue(), "once")
		c.Restart = ""
	}

	// sign asked while an agent sees a member not trusting the new CA (its own check of the step, a
	// hand-edited one): it keeps signing with the current CA.
	agents[0].Rotation.Phase = api.CAPhaseSign
	agents[0].Confirm = func(context.Context, func(api.Report) bool) bool { return false }
	f0, err := agents[0].Ensure(ctx)
	require.NoError(t, err)
	require.Equal(t, old, f0.Issuer, "not confirmed: still the current CA")
	agents[0].Confirm = nil

	// sign: reissued from the new CA without a restart, the member key kept.
	for _, c := range agents {
		c.Rotation.Phase = api.CAPhaseSign
	}
	facts = ensureAll()
	for i, f := range facts {
		require.Equal(t, next, f.Issuer, "agent %d serves a certificate of the new CA", i)
	}
	memberNow, _ = pki.ReadFiles(agents[1].PeerDir, pki.KeyCert, pki.KeyKey)
	require.Equal(t, memberBefore[pki.KeyKey], memberNow[pki.KeyKey])
	client, _, _, _ = store.Get(ctx, "r-client-tls")
	leaf, err := pki.ParseCertificates(client[pki.KeyCert])
	require.NoError(t, err)
	nextCA, err := pki.ParseCertificates(secret[KeyNextCert])
	require.NoError(t, err)
	require.NoError(t, leaf[0].CheckSignatureFrom(nextCA[0]), "the client Secret is issued by the new CA")

	// drop: the Secret keeps the new CA alone; running members keep trusting both until restarted.
	for _, c := range agents {
		c.Rotation.Phase = api.CAPhaseDrop
		c.ClientGrace = time.Hour
	}
	ensureAll()
	secret, _, _, _ = store.Get(ctx, "r-ca")
	require.NotEmpty(t, secret[KeyNextCert], "held: the client Secret was reissued less than the grace ago (mounted copies lag)")
	for _, c := range agents {
		c.ClientGrace = time.Millisecond
	}
	facts = ensureAll()
	secret, _, _, _ = store.Get(ctx, "r-ca")
	require.Empty(t, secret[KeyNextCert])
	cas, _ = fingerprintsOf(secret[pki.KeyCA])
	require.Equal(t, []string{next}, cas)
	facts = ensureAll()
	for i, f := range facts {
		require.Equal(t, api.CASecretState{Current: next, CurrentMark: mark}, f.Secret, "agent %d", i)
		require.Equal(t, bundle, strings.Join(f.CAs, ","), "agent %d: etcd still trusts both until its restart", i)
		require.Equal(t, next, f.Issuer)
	}
	client, _, _, _ = store.Get(ctx, "r-client-tls")
	cas, _ = fingerprintsOf(client[pki.KeyCA])
	require.Equal(t, []string{next}, cas, "clients are handed the new CA alone")
	for i, c := range agents {
		require.Equal(t, []string{next}, restartInPlace(i, next), "agent %d trusts the new CA alone", i)
		c.Restart, c.Rotation = "", api.CARotationIntent{}
	}
	// Finished: the same request asks nothing more.
	for _, c := range agents {
		c.Rotation = api.CARotationIntent{Mark: mark, Phase: api.CAPhaseTrust}
	}
	facts = ensureAll()
	require.Empty(t, facts[0].Secret.Next, "a CA made for the mark signs already: no new one")
}

// A CA rotation (docs/design/14-tls.md §14.6) on real etcd under a continuous writer, the test playing the
// hook: the new CA is made, each member's etcd restarts in place (a new PID, the same data) to trust both
// CAs, everything is reissued from the new CA without a restart, the old CA is dropped and each member
// restarts again to trust the new one alone. Every member then serves a certificate of the new CA on
// both planes, and no acknowledged write is lost; the writer's failed writes are recorded per step.
func TestMembershipTLSCARotation(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newCluster(t, v, 3)
		var w *twriter
		c.bootstrap(&w, 3)
		mark := api.RenewalMark("ca-rotation-test")
		report := func(s *slot) api.Report { return c.leases.Report(s.lease) }
		healthy := func() bool { return c.voters(0, 1, 2) }
		setAll := func(phase string) {
			for _, s := range c.slots {
				c.leases.SetCA(s.lease, mark+" "+phase, "")
			}
		}
		// restartEach plays the hook's turns: one member at a time, the next only once every member is a
		// healthy voter again.
		restartEach := func(phase, trust string) {
			for _, s := range c.slots {
				pid := s.etcdPID()
				c.leases.SetCA(s.lease, mark+" "+phase, trust)
				c.waitFor(s.name+" to restart trusting "+shortList(trust), stepMax, func() bool {
					return report(s).TLSCAs == trust && healthy()
				})
				require.NotEqual(t, pid, s.etcdPID(), "etcd of %s restarted", s.name)
				c.leases.SetCA(s.lease, mark+" "+phase, "")
			}
		}

		w.Step("CA rotation: new CA")
		setAll(api.CAPhaseTrust)
		var sec api.CASecretState
		c.waitFor("every agent to report the new CA in the Secret", stepMax, func() bool {
			for _, s := range c.slots {
				st, ok := api.ParseCASecretState(report(s).TLSCASecret)
				if !ok || st.Next == "" || st.NextMark != mark {
					return false
				}
				sec = st
			}
			return true
		})
		w.Step("CA rotation: restarts to trust both")
		took := time.Now()
		restartEach(api.CAPhaseTrust, sec.Trust())
		t.Logf("every member trusts both CAs after %s", time.Since(took).Round(time.Millisecond))

		w.Step("CA rotation: reissue")
		pids := map[string]int{}
		for _, s := range c.slots {
			pids[s.name] = s.etcdPID()
		}
		setAll(api.CAPhaseSign)
		c.waitFor("every member to serve a certificate of the new CA", stepMax, func() bool {
			for _, s := range c.slots {
				if report(s).TLSIssuer != sec.Next {
					return false
				}
			}
			return true
		})
		for _, s := range c.slots {
			require.Equal(t, pids[s.name], s.etcdPID(), "reissued without restarting %s", s.name)
		}

		w.Step("CA rotation: drop the old CA")
		setAll(api.CAPhaseDrop)
		c.waitFor("the Secret to hold the new CA alone", stepMax, func() bool {
			for _, s := range c.slots {
				if st, _ := api.ParseCASecretState(report(s).TLSCASecret); st.Current != sec.Next || st.Next != "" {
					return false
				}
			}
			return true
		})
		w.Step("CA rotation: restarts to trust the new CA alone")
		restartEach(api.CAPhaseDrop, sec.Next)
		for _, s := range c.slots {
			c.leases.SetCA(s.lease, "", "")
		}

		// Every member serves a certificate of the new CA, checked by a handshake that trusts only it.
		data, _, _, err := c.secrets.Get(context.Background(), "m-ca")
		require.NoError(t, err)
		cas, err := fingerprintsOf(data[pki.KeyCA])
		require.NoError(t, err)
		require.Equal(t, []string{sec.Next}, cas)
		// mustServed dials with the client Secret, whose ca.crt holds the new CA alone now.
		for _, s := range c.slots {
			c.mustServed(s.clientURL)
			c.mustServed(s.peerURL)
		}
		w.Step("settled")
		c.waitFor("writes after the rotation", stepMax, func() bool { return w.AckedInStep() >= 5 })
		t.Logf("failed writes: new CA %d, restarts to trust both %d, reissue %d, drop %d, restarts to trust the new one %d",
			w.Failed("CA rotation: new CA"), w.Failed("CA rotation: restarts to trust both"), w.Failed("CA rotation: reissue"),
			w.Failed("CA rotation: drop the old CA"), w.Failed("CA rotation: restarts to trust the new CA alone"))
		w.Verify(t)
	})
}

func shortList(fps string) string { return shortFPs(strings.Split(fps, ",")) }
