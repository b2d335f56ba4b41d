package membership

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// Where the randomness lives (docs/design/14-tls.md §14.2): certificates and keys are made by the agents, never
// by the hook, so /sync stays a pure function of its request. The cluster's CA is one Secret that the
// first agent to need it creates; the API server's create is the arbiter, so two agents (or an agent
// crashing between "CA created" and anything after) can never leave two CAs: the loser of the create
// reads the winner's. Everything else is derived from that Secret and is safe to redo.

// ErrSecretExists and ErrSecretConflict are the two outcomes of a lost race on a Secret.
var (
	ErrSecretExists   = errors.New("secret already exists")
	ErrSecretConflict = errors.New("secret changed since it was read")
	// ErrSecretNotOwned: a Secret of the name exists and is not this EtcdCluster's (OwnedStore).
	ErrSecretNotOwned = errors.New("exists and is not this EtcdCluster's: not overwritten")
)

// OwnedStore is a SecretStore that can tell its cluster's Secrets from others': GetOwned is Get,
// except that a Secret this cluster does not own is ErrSecretNotOwned. A store without it (tests) owns
// every Secret.
type OwnedStore interface {
	GetOwned(ctx context.Context, name string) (data map[string][]byte, version string, found bool, err error)
}

// SecretStore is the agent's access to its cluster's two Secrets (CA, client certificate).
type SecretStore interface {
	// Get returns the data and resourceVersion; found is false when the Secret does not exist.
	Get(ctx context.Context, name string) (data map[string][]byte, version string, found bool, err error)
	// Create creates the Secret, or returns ErrSecretExists.
	Create(ctx context.Context, name string, data map[string][]byte) error
	// Update replaces the data if the Secret is still at version, or returns ErrSecretConflict.
	Update(ctx context.Context, name, version string, data map[string][]byte) error
}

// Certs keeps one member's TLS files current, per plane: on the built-in CA the agent makes the member
// certificate itself; from a user's Secret (mounted at PeerSource/ClientSource) it checks the files and
// copies them to where etcd reads them only when they are usable, so a bad Secret never reaches etcd.
type Certs struct {
	Store SecretStore
	// CASecret: the built-in CA (empty when neither plane uses it). ClientSecret: the built-in client
	// certificate Secret (empty when the client plane is the user's).
	CASecret     string
	ClientSecret string
	CADuration   time.Duration
	CertDuration time.Duration
	// PeerDir and ClientDir receive tls.crt, tls.key and ca.crt (the files the etcd flags name).
	PeerDir, ClientDir string
	// PeerSource and ClientSource: a user's Secret for that plane, mounted; empty for the built-in CA.
	PeerSource, ClientSource string
	// RootSecret: the root identity's Secret (CN root, docs/design/20-auth.md §20.2), kept like the client
	// Secret; RootDir receives its files for the agent's own etcd client. Empty without spec.auth.
	RootSecret, RootDir string
	// Users: the declared users, whose Secrets the agents keep (set from the auth config at each look).
	// IssueUsers: this agent issues and renews them (the leader's agent); every agent checks them before
	// a CA rotation drops the old CA.
	Users      []api.AuthUser
	IssueUsers bool
	// Rotations: the rotation mark each user's certificate must carry (api.AuthConfig.Rotations).
	Rotations map[string]string
	// UserNotAfter and UserErrors: each user's certificate expiry, or why its Secret could not be kept,
	// as last ensured by this agent.
	UserNotAfter map[string]time.Time
	UserErrors   map[string]string
	// RootPassword: root's password in the root Secret; Logins: each user's password logins as its Secret
	// holds them, on the leader's agent (docs/design/20-auth.md §20.4): what etcd must hold.
	RootPassword string
	Logins       map[string]Login
	// CommonName, DNSNames and IPs of a built-in member certificate.
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	// PeerNames and ClientNames are what a user's certificate must cover for this member.
	PeerNames, ClientNames []string
	// Renewal: the renewal mark the built-in certificates must carry (the member Lease's etcd.io/renewal;
	// "" asks for none). One without it is renewed at the next look (docs/design/14-tls.md §14.7).
	Renewal string
	// Rotation: the CA rotation step the hook asks for (etcd.io/ca-rotation; zero: none). Restart: the
	// CAs this member may restart its etcd to trust (etcd.io/ca-restart; "" none). docs/design/14-tls.md §14.6.
	Rotation api.CARotationIntent
	Restart  string
	// PeerDNSChecked says whether a user's peer certificate passes etcd's own check of connecting peers
	// (api.Names.PeerDNSChecked for this member); nil: not checked.
	PeerDNSChecked func(dnsNames []string) bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
	// Events receives an event for each CA, certificate or Secret this member makes (nil: none); notes
	// name the member by CommonName (the pod).
	Events Recorder
	// Confirm says whether every member of the cluster (the last member list the agent read) has a fresh
	// Lease whose report satisfies ok: an agent's own check, before it signs with a rotation's new CA or
	// drops the old one, that the hook's step is right (a hand-edited step must not split the cluster).
	// Nil: not checked (tests of one agent).
	Confirm func(ctx context.Context, ok func(api.Report) bool) bool
	// ClientGrace is how long the client Secret must have been issued by the new CA before the old CA is
	// dropped (default 2 min): clients and Jobs reading it from a mounted volume see a change only after
	// the kubelet's next sync, and would present the old certificate to members trusting the new CA alone.
	ClientGrace time.Duration
	// MayCreateCA says whether this member may create a missing CA Secret: only one without data (a
	// member with data belongs to a cluster whose members trust the CA they started with; a new CA
	// under them would refuse every connection). Nil: always.
	MayCreateCA func() bool

	// pinned: the CAs (fingerprints of ca.crt) each directory held when etcd was started on it (Pin),
	// until it stops (Unpin; a user's plane stays pinned for the agent's life). etcd reads its trusted CAs
	// only at start (docs/design/14-tls.md §14.2): files trusting another CA would cut it off from every member,
	// so they are refused (a CA change is the rotation of §14.6).
	pinned map[string][]string
	// pinnedPEM: the ca.crt bytes of each built-in directory when pinned; a running member's files keep
	// them (what etcd trusts) while the CA Secret changes under it in a rotation.
	pinnedPEM map[string][]byte
	// secret: the CA Secret as last read (reported, and compared with Restart).
	secret api.CASecretState
	// confirmedNext: the new CA every member was seen trusting (Confirm), so the check runs once.
	confirmedNext string
	// ensured: an Ensure succeeded since the agent started (a missing CA Secret is then never made
	// again); ensuredSincePin: one succeeded since etcd started (a restart is due only on files known
	// to be the Secret's, not on a failed refresh's leftovers, which would restart it at every look).
	ensured, ensuredSincePin bool
}

// ErrCAChanged: the CA behind a plane is not the one etcd runs with.
var ErrCAChanged = errors.New("the CA changed")

// checkSigner refuses a built-in CA that etcd (started on dir's files) does not trust: a CA Secret
// deleted and made again by hand, or a rotation's new CA before this member restarted to trust it.
func (c *Certs) checkSigner(dir string, ca pki.KeyPair) error {
	was, ok := c.pinned[dir]
	if !ok {
		return nil
	}
	fp := pki.Fingerprint(ca.Cert)
	for _, p := range was {
		if p == fp {
			return nil
		}
	}
	return fmt.Errorf("%w: etcd trusts %s, the CA Secret signs with %s; keeping the files in use (a CA change needs the rotation of docs/design/14-tls.md §14.6)", ErrCAChanged, shortFPs(was), shortFPs([]string{fp}))
}

// checkPinned refuses files for dir whose trusted CAs are not the ones etcd started with.
func (c *Certs) checkPinned(dir string, files map[string][]byte) error {
	was, ok := c.pinned[dir]
	if !ok {
		return nil
	}
	now, err := fingerprintsOf(files[pki.KeyCA])
	if err != nil {
		return fmt.Errorf("%s: %w", pki.KeyCA, err)
	}
	if strings.Join(now, ",") != strings.Join(was, ",") {
		return fmt.Errorf("%w: etcd trusts %s, the new files %s; keeping the files in use (a CA change needs the rotation of docs/design/14-tls.md §14.6)", ErrCAChanged, shortFPs(was), shortFPs(now))
	}
	return nil
}

func shortFPs(fps []string) string {
	out := make([]string, len(fps))
	for i, fp := range fps {
		if len(fp) > 16 {
			fp = fp[:16]
		}
		out[i] = fp
	}
	return strings.Join(out, ",")
}

// Pin records what each directory holds, as etcd is started on it: the CAs etcd will trust until it
// stops (docs/design/14-tls.md §14.2). Called by the agent right before it starts etcd; Unpin when etcd stops.
// A directory already pinned (a user's plane, below) keeps its pin.
func (c *Certs) Pin() {
	c.ensuredSincePin = false
	if c.pinned == nil {
		c.pinned, c.pinnedPEM = map[string][]string{}, map[string][]byte{}
	}
	for _, dir := range []string{c.PeerDir, c.ClientDir} {
		if _, ok := c.pinned[dir]; ok {
			continue
		}
		files, err := pki.ReadFiles(dir, pki.KeyCA)
		if err != nil {
			continue
		}
		if fps, err := fingerprintsOf(files[pki.KeyCA]); err == nil {
			c.pinned[dir], c.pinnedPEM[dir] = fps, files[pki.KeyCA]
		}
	}
}

// RestartDue says whether this member's etcd should restart now to trust the CAs the CA Secret lists:
// the hook lets it (Restart names exactly those CAs, read from the same Secret) and etcd, started on the
// files of a built-in plane, trusts others. The caller stops etcd, calls Unpin and starts it again.
func (c *Certs) RestartDue() bool {
	if c.Restart == "" || !c.ensuredSincePin || c.secret.Trust() != c.Restart {
		return false
	}
	for _, plane := range []struct{ dir, source string }{{c.PeerDir, c.PeerSource}, {c.ClientDir, c.ClientSource}} {
		if was, ok := c.pinned[plane.dir]; ok && plane.source == "" && strings.Join(was, ",") != c.Restart {
			return true
		}
	}
	return false
}

// Unpin forgets what etcd was started with: etcd is stopped, and the next Ensure writes the CAs of the
// Secret into the files the next start reads.
//
// A user's plane stays pinned for the agent's life: its CA is the user's issuer's, rotated by the user
// (docs/design/14-tls.md §14.8), and a changed CA must not reach even a restarted etcd while the other members
// trust the old one.
func (c *Certs) Unpin() {
	for _, plane := range []struct{ dir, source string }{{c.PeerDir, c.PeerSource}, {c.ClientDir, c.ClientSource}} {
		if plane.source == "" {
			delete(c.pinned, plane.dir)
			delete(c.pinnedPEM, plane.dir)
		}
	}
}

// confirm runs Confirm (true when there is none).
func (c *Certs) confirm(ctx context.Context, ok func(api.Report) bool) bool {
	return c.Confirm == nil || c.Confirm(ctx, ok)
}

func fingerprintsOf(pemBytes []byte) ([]string, error) {
	cas, err := pki.ParseCertificates(pemBytes)
	if err != nil {
		return nil, err
	}
	var fps []string
	for _, ca := range cas {
		fps = append(fps, pki.Fingerprint(ca))
	}
	sort.Strings(fps)
	return fps, nil
}

func (c *Certs) event(reason, action, format string, args ...any) {
	recorderOr(c.Events).Event(reason, action, "pod "+c.CommonName+": "+fmt.Sprintf(format, args...), false)
}

// CertFacts is what a member reports of its files.
type CertFacts struct {
	CAs []string // fingerprints of the trusted CAs, sorted
	// Issuer: the fingerprint of the CA in ca.crt that signed the member certificate ("" none of them).
	Issuer string
	// Secret: the CA Secret as last read (built-in planes only).
	Secret       api.CASecretState
	CANotAfter   time.Time
	CertNotAfter time.Time
	// Renewal: the renewal mark of the member certificate in use (both built-in planes serve the same
	// one; "" when none or from a user's Secret).
	Renewal string
}

func (c *Certs) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Certs) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Ensure makes the member's files valid for now. Built-in planes: the CA Secret exists (created if
// absent), the client Secret is signed by it and not due for renewal, and the member's certificate is
// signed by it, covers its names and is not due for renewal. A user's plane: the mounted Secret is
// checked and copied when it changed. What is already right is left alone: etcd reads the files again
// for each new TLS handshake (docs/design/14-tls.md §14.3), so replacing them never needs a restart. It returns
// what the files in use hold, also when it returns an error (the files kept then).
func (c *Certs) Ensure(ctx context.Context) (CertFacts, error) {
	var signer pki.KeyPair
	var sec caSecret
	var builtIn map[string][]byte
	if c.PeerSource == "" || c.ClientSource == "" {
		var err error
		if sec, err = c.ensureCA(ctx); err != nil {
			return c.facts(), err
		}
		if sec, err = c.addNextCA(ctx, sec); err != nil {
			return c.facts(), err
		}
		signer = c.signer(ctx, sec)
		// A CA Secret replaced under running members (deleted and made again, by hand or by a re-created
		// cluster), or a new CA this member's etcd does not trust yet: nothing is issued from it, not even
		// the client Secret.
		for _, plane := range []struct{ dir, source string }{{c.PeerDir, c.PeerSource}, {c.ClientDir, c.ClientSource}} {
			if plane.source != "" {
				continue
			}
			if err := c.checkSigner(plane.dir, signer); err != nil {
				return c.facts(), err
			}
		}
		if c.ClientSecret != "" {
			if err := c.ensureClient(ctx, signer, sec.trustPEM()); err != nil {
				return c.facts(), err
			}
		}
		if c.RootSecret != "" {
			data, err := c.ensureIdentity(ctx, signer, sec.trustPEM(), identity{secret: c.RootSecret, cn: api.RootUser, what: "root identity", login: true})
			if err != nil {
				return c.facts(), err
			}
			c.RootPassword = string(data[api.SecretKeyPassword])
			if c.RootDir != "" {
				if _, err := c.writeIfChanged(c.RootDir, data); err != nil {
					return c.facts(), err
				}
			}
		}
		if c.IssueUsers {
			c.ensureUsers(ctx, signer, sec.trustPEM())
		}
	}
	var errs []error
	for _, plane := range []struct{ source, dir, name string }{{c.PeerSource, c.PeerDir, "peer"}, {c.ClientSource, c.ClientDir, "client"}} {
		if plane.source != "" {
			names, usage := c.PeerNames, pki.Usage{Server: true, Client: true}
			if plane.name == "client" {
				names = c.ClientNames
			}
			if err := c.takeSource(plane.source, plane.dir, names, usage, plane.name); err != nil {
				errs = append(errs, fmt.Errorf("%s plane: %w", plane.name, err))
			}
			continue
		}
		// The files of a running etcd keep trusting what it was started with (the rotation adds and drops
		// CAs with restarts, docs/design/14-tls.md §14.6); a start takes what the Secret lists.
		trust := sec.trustPEM()
		if pem, ok := c.pinnedPEM[plane.dir]; ok {
			trust = pem
		}
		if builtIn == nil {
			files, err := c.ensureMember(plane.dir, signer, trust)
			if err != nil {
				return c.facts(), err
			}
			builtIn = files
			continue
		}
		// The other built-in plane serves the same certificate.
		if _, err := c.writeIfChanged(plane.dir, builtIn); err != nil {
			return c.facts(), err
		}
	}
	if builtIn != nil {
		if err := c.dropOldCA(ctx, sec, signer, builtIn); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		c.ensured, c.ensuredSincePin = true, true
	}
	return c.facts(), errors.Join(errs...)
}

// takeSource checks a user's mounted Secret and copies it to dir when it is usable and changed. An
// unusable one is an error and the files in dir stay: the running member keeps serving.
func (c *Certs) takeSource(source, dir string, names []string, usage pki.Usage, plane string) error {
	peer := plane == "peer"
	files, err := pki.ReadFiles(source, pki.KeyCert, pki.KeyKey, pki.KeyCA)
	if err != nil {
		return fmt.Errorf("reading the mounted Secret: %w", err)
	}
	leaf, problems := pki.CheckSecret(files, names, usage, c.now())
	if len(problems) > 0 {
		return errors.New(pki.Summary(problems))
	}
	if err := c.checkPinned(dir, files); err != nil {
		return err
	}
	if peer && c.PeerDNSChecked != nil && !c.PeerDNSChecked(leaf.DNSNames) {
		return errors.New("tls.crt: etcd would refuse the peer connections: its DNS names match neither this member's host nor its PTR name (list each member's host, or *.<peer service>.<namespace>.svc.cluster.local)")
	}
	replaced, err := c.writeIfChanged(dir, files)
	if err == nil && replaced {
		// The first copy in a new pod is no news; a changed Secret (cert-manager renewed it) is.
		c.event(EventCertificateRenewed, "TakeRenewedCertificate", "took the renewed %s certificate from its mounted Secret (expires %s)", plane, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return err
}

// writeIfChanged writes files to dir unless it holds them already; replaced says whether it replaced
// other files (not a first write).
func (c *Certs) writeIfChanged(dir string, files map[string][]byte) (replaced bool, err error) {
	cur, _ := pki.ReadFiles(dir, pki.KeyCert, pki.KeyKey, pki.KeyCA)
	same := cur != nil
	for k, v := range files {
		same = same && string(cur[k]) == string(v)
	}
	if same {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	return cur != nil, pki.WriteFiles(dir, files)
}

// facts reads what the files in use hold, over both planes.
func (c *Certs) facts() CertFacts {
	var all CertFacts
	seen := map[string]bool{}
	for _, dir := range []string{c.PeerDir, c.ClientDir} {
		files, err := pki.ReadFiles(dir, pki.KeyCert, pki.KeyKey, pki.KeyCA)
		if err != nil {
			continue
		}
		f, err := factsOf(files)
		if err != nil {
			continue
		}
		for _, fp := range f.CAs {
			if !seen[fp] {
				seen[fp] = true
				all.CAs = append(all.CAs, fp)
			}
		}
		if all.CANotAfter.IsZero() || f.CANotAfter.Before(all.CANotAfter) {
			all.CANotAfter = f.CANotAfter
		}
		if all.CertNotAfter.IsZero() || f.CertNotAfter.Before(all.CertNotAfter) {
			all.CertNotAfter = f.CertNotAfter
		}
		if all.Renewal == "" {
			all.Renewal = f.Renewal
		}
		if all.Issuer == "" {
			all.Issuer = f.Issuer
		}
	}
	sort.Strings(all.CAs)
	all.Secret = c.secret
	return all
}

// ensureCA reads the CA Secret, creating it when absent. A Secret that is there but unusable is an
// error, never overwritten: the running members trust it.
func (c *Certs) ensureCA(ctx context.Context) (caSecret, error) {
	for attempt := 0; attempt < 3; attempt++ {
		data, version, found, err := c.Store.Get(ctx, c.CASecret)
		if err != nil {
			return caSecret{}, fmt.Errorf("reading Secret %s: %w", c.CASecret, err)
		}
		if found {
			sec, err := parseCASecret(c.CASecret, data, version)
			if err != nil {
				return caSecret{}, err
			}
			c.secret = sec.state()
			return sec, nil
		}
		if c.ensured || len(c.pinned) > 0 || (c.MayCreateCA != nil && !c.MayCreateCA()) {
			return caSecret{}, fmt.Errorf("Secret %s is missing: this member's cluster trusts the CA it was created with, so no new one is made (restore the Secret; a new CA needs the rotation of docs/design/14-tls.md §14.6)", c.CASecret)
		}
		ca, err := pki.NewCA(c.CASecret, c.now(), c.CADuration)
		if err != nil {
			return caSecret{}, err
		}
		err = c.Store.Create(ctx, c.CASecret, map[string][]byte{
			pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM, pki.KeyCA: ca.CertPEM,
		})
		switch {
		case err == nil:
			c.log().Info("created the cluster CA", "secret", c.CASecret, "fingerprint", pki.Short(ca.Cert), "notAfter", ca.Cert.NotAfter)
			c.event(EventCACreated, "CreateCA", "created the cluster CA in Secret %s (%s, expires %s)", c.CASecret, pki.Short(ca.Cert), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
			continue // read it back, with its version
		case errors.Is(err, ErrSecretExists):
			continue // another agent won: use its CA
		default:
			return caSecret{}, fmt.Errorf("creating Secret %s: %w", c.CASecret, err)
		}
	}
	return caSecret{}, fmt.Errorf("Secret %s: created and deleted again while being read", c.CASecret)
}

// identity is a client certificate Secret the agents keep: the shared client Secret (CN etcdhook),
// the root identity (CN root) and each declared user's (CN the user name).
type identity struct {
	secret, cn string
	// owned: the Secret is written only if it is this cluster's (a name the user chose).
	owned bool
	// what names it in logs and Events.
	what string
	// mark: the renewal mark it must carry instead of Renewal (a user's rotation); "" none.
	mark string
	// login: the Secret also carries the etcd user name and a password (root and the users; not the
	// shared client Secret, whose CN is no etcd user).
	login bool
}

// ensureClient keeps the client certificate Secret signed by ca and within its renewal time.
func (c *Certs) ensureClient(ctx context.Context, ca pki.KeyPair, trust []byte) error {
	_, err := c.ensureIdentity(ctx, ca, trust, identity{secret: c.ClientSecret, cn: pki.Organization, what: "client certificate"})
	return err
}

// ensureIdentity keeps an identity's Secret signed by ca, trusting trust, for its CN and within its
// renewal time, and returns its data. Losing a race to another agent is fine: its certificate is as good.
func (c *Certs) ensureIdentity(ctx context.Context, ca pki.KeyPair, trust []byte, id identity) (map[string][]byte, error) {
	data, version, found, err := c.getIdentity(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", id.secret, err)
	}
	mark := c.Renewal
	if id.mark != "" {
		mark = id.mark
	}
	certOK := found && c.currentFor(data, ca, trust, pki.Usage{Client: true}, nil, mark) && commonName(data) == id.cn
	// The login: made when the Secret has none that works (a renewal keeps it; a rotation changes it
	// through the leader's auth pass, once etcd holds the new one: login.go).
	var login map[string][]byte
	if id.login {
		if login, err = ensureLogin(id.cn, data); err != nil {
			return nil, err
		}
	}
	if certOK && login == nil {
		return data, nil
	}
	next := maps.Clone(data)
	if next == nil {
		next = map[string][]byte{}
	}
	var kp pki.KeyPair
	if !certOK {
		if kp, err = pki.Issue(ca, pki.LeafRequest{CommonName: id.cn, Client: true, Lifetime: c.CertDuration, Renewal: mark}, c.now()); err != nil {
			return nil, err
		}
		next[pki.KeyCert], next[pki.KeyKey], next[pki.KeyCA] = kp.CertPEM, kp.KeyPEM, trust
	}
	if login != nil {
		next = login
		if !certOK {
			next[pki.KeyCert], next[pki.KeyKey], next[pki.KeyCA] = kp.CertPEM, kp.KeyPEM, trust
		}
	}
	if !found {
		err = c.Store.Create(ctx, id.secret, next)
	} else {
		err = c.Store.Update(ctx, id.secret, version, next)
	}
	switch {
	case err == nil && certOK:
		c.log().Info("wrote the login of the "+id.what, "secret", id.secret)
		return next, nil
	case err == nil:
		c.log().Info("issued the "+id.what, "secret", id.secret, "notAfter", kp.Cert.NotAfter)
		if found {
			c.event(EventCertificateRenewed, "RenewClientCertificate", "renewed the %s in Secret %s (expires %s)", id.what, id.secret, kp.Cert.NotAfter.UTC().Format(time.RFC3339))
		} else {
			c.event(EventCertificateIssued, "IssueClientCertificate", "issued the %s in Secret %s (expires %s)", id.what, id.secret, kp.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
		return next, nil
	case errors.Is(err, ErrSecretExists), errors.Is(err, ErrSecretConflict):
		// Another agent wrote it at the same moment: read its version at the next look.
		data, _, _, err := c.getIdentity(ctx, id)
		return data, err
	default:
		return nil, fmt.Errorf("writing Secret %s: %w", id.secret, err)
	}
}

// ensureUsers keeps each declared user's Secret. A user's problem (a Secret of that name owned by
// another application) is that user's, reported through the auth report, never the member's.
func (c *Certs) ensureUsers(ctx context.Context, ca pki.KeyPair, trust []byte) {
	c.UserNotAfter, c.UserErrors = map[string]time.Time{}, map[string]string{}
	for _, id := range c.identities() {
		if !id.owned {
			continue
		}
		data, err := c.ensureIdentity(ctx, ca, trust, id)
		if err != nil {
			c.UserErrors[id.cn] = err.Error()
			continue
		}
		if l, ok := loginOf(id.cn, data); ok {
			if c.Logins == nil {
				c.Logins = map[string]Login{}
			}
			c.Logins[id.cn] = l
		}
		if leafs, err := pki.ParseCertificates(data[pki.KeyCert]); err == nil && len(leafs) > 0 {
			c.UserNotAfter[id.cn] = leafs[0].NotAfter
		}
	}
}

// ensureLogin is the data of an identity Secret with a usable login, or nil when it has one: root logs
// in as root; a user as its first login slot, with a new password, when its Secret names none of its
// slots with a usable password.
func ensureLogin(cn string, data map[string][]byte) (map[string][]byte, error) {
	if cn == api.RootUser {
		if string(data[api.SecretKeyUsername]) == api.RootUser && usablePassword(string(data[api.SecretKeyPassword])) {
			return nil, nil
		}
		pw, err := newPassword()
		if err != nil {
			return nil, err
		}
		out := maps.Clone(data)
		if out == nil {
			out = map[string][]byte{}
		}
		out[api.SecretKeyUsername], out[api.SecretKeyPassword] = []byte(api.RootUser), []byte(pw)
		return out, nil
	}
	if _, ok := loginOf(cn, data); ok {
		return nil, nil
	}
	pw, err := newPassword()
	if err != nil {
		return nil, err
	}
	return Login{User: api.LoginSlot(cn, 1), Password: pw}.put(data), nil
}

// identities are the client certificates the agents keep in Secrets besides the members' own.
func (c *Certs) identities() []identity {
	var out []identity
	if c.ClientSecret != "" {
		out = append(out, identity{secret: c.ClientSecret, cn: pki.Organization, what: "client certificate"})
	}
	if c.RootSecret != "" {
		out = append(out, identity{secret: c.RootSecret, cn: api.RootUser, what: "root identity", login: true})
	}
	for _, u := range c.Users {
		out = append(out, identity{secret: u.SecretName, cn: u.Name, owned: true, what: "credentials of user " + u.Name, mark: c.Rotations[u.Name], login: true})
	}
	return out
}

// getIdentity reads an identity's Secret; one the cluster does not own is ErrSecretNotOwned.
func (c *Certs) getIdentity(ctx context.Context, id identity) (map[string][]byte, string, bool, error) {
	if o, ok := c.Store.(OwnedStore); ok && id.owned {
		return o.GetOwned(ctx, id.secret)
	}
	return c.Store.Get(ctx, id.secret)
}

// commonName is the CN of a Secret's certificate ("" when it does not parse).
func commonName(data map[string][]byte) string {
	leafs, err := pki.ParseCertificates(data[pki.KeyCert])
	if err != nil || len(leafs) == 0 {
		return ""
	}
	return leafs[0].Subject.CommonName
}

// current says whether a cert-manager-layout set of files is signed by ca, trusts exactly trust, is
// usable now for usage, covers names, and is not yet due for renewal (2/3 of its lifetime).
func (c *Certs) current(data map[string][]byte, ca pki.KeyPair, trust []byte, usage pki.Usage, names []string) bool {
	return c.currentFor(data, ca, trust, usage, names, c.Renewal)
}

// currentFor is current with the renewal mark asked for given ("" asks for none).
func (c *Certs) currentFor(data map[string][]byte, ca pki.KeyPair, trust []byte, usage pki.Usage, names []string, renewal string) bool {
	if string(data[pki.KeyCA]) != string(trust) {
		return false // a CA added or dropped by a rotation (or a start after one)
	}
	leaf, problems := pki.CheckSecret(data, names, usage, c.now())
	if len(problems) > 0 || leaf == nil {
		return false
	}
	if err := pki.Verify(leaf, []*x509.Certificate{ca.Cert}, usage, c.now()); err != nil {
		return false
	}
	if renewal != "" && pki.RenewalOf(leaf) != renewal {
		return false // issued before the renewal asked for (etcd.io/renew-certificates)
	}
	return c.now().Before(pki.RenewAt(leaf))
}

// ensureMember (re)issues the member certificate when the files are missing, signed by another CA,
// missing a name (a new pod IP), or due for renewal.
func (c *Certs) ensureMember(dir string, ca pki.KeyPair, trust []byte) (map[string][]byte, error) {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPs {
		names = append(names, ip.String())
	}
	files, _ := pki.ReadFiles(dir, pki.KeyCert, pki.KeyKey, pki.KeyCA)
	files0 := files
	usage := pki.Usage{Server: true, Client: true}
	if files == nil || !c.current(files, ca, trust, usage, names) {
		req := pki.LeafRequest{
			CommonName: c.CommonName, DNSNames: c.DNSNames, IPs: c.IPs, Server: true, Client: true, Lifetime: c.CertDuration,
			Renewal: c.Renewal,
		}
		// A renewal keeps the key this pod made (it lives only in the pod's memory): etcd opens the
		// certificate and the key file separately for each handshake, and with the same key a handshake
		// that reads one file before the swap and the other after still gets a matching pair. A new pod
		// starts with an empty directory, and so with a new key.
		var kp pki.KeyPair
		var err error
		if old, perr := pki.ParseKeyPair(files[pki.KeyCert], files[pki.KeyKey]); perr == nil && old.Key != nil {
			kp, err = pki.IssueWithKey(ca, req, c.now(), old.Key)
		} else {
			kp, err = pki.Issue(ca, req, c.now())
		}
		if err != nil {
			return nil, err
		}
		files = map[string][]byte{pki.KeyCert: kp.CertPEM, pki.KeyKey: kp.KeyPEM, pki.KeyCA: trust}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := pki.WriteFiles(dir, files); err != nil {
			return nil, fmt.Errorf("writing the member certificate: %w", err)
		}
		c.log().Info("issued the member certificate", "notAfter", kp.Cert.NotAfter, "ca", pki.Short(ca.Cert))
		if files0 == nil {
			c.event(EventCertificateIssued, "IssueMemberCertificate", "issued the member certificate (CA %s, expires %s)", pki.Short(ca.Cert), kp.Cert.NotAfter.UTC().Format(time.RFC3339))
		} else {
			c.event(EventCertificateRenewed, "RenewMemberCertificate", "renewed the member certificate (due, new names or another CA; CA %s, expires %s)", pki.Short(ca.Cert), kp.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return files, nil
}

// factsOf reads what a set of files holds, for the member's report.
func factsOf(files map[string][]byte) (CertFacts, error) {
	cas, err := pki.ParseCertificates(files[pki.KeyCA])
	if err != nil {
		return CertFacts{}, fmt.Errorf("%s: %w", pki.KeyCA, err)
	}
	leafs, err := pki.ParseCertificates(files[pki.KeyCert])
	if err != nil {
		return CertFacts{}, fmt.Errorf("%s: %w", pki.KeyCert, err)
	}
	f := CertFacts{CertNotAfter: leafs[0].NotAfter, Renewal: pki.RenewalOf(leafs[0])}
	for _, ca := range cas {
		f.CAs = append(f.CAs, pki.Fingerprint(ca))
		if f.Issuer == "" && leafs[0].CheckSignatureFrom(ca) == nil {
			f.Issuer = pki.Fingerprint(ca)
		}
		if f.CANotAfter.IsZero() || ca.NotAfter.Before(f.CANotAfter) {
			f.CANotAfter = ca.NotAfter
		}
	}
	sort.Strings(f.CAs)
	return f, nil
}

// fill puts the facts into a report.
func (f CertFacts) fill(r *api.Report) {
	if len(f.CAs) == 0 {
		return
	}
	r.TLSCAs = strings.Join(f.CAs, ",")
	r.TLSCANotAfter = f.CANotAfter.UTC().Format(time.RFC3339)
	r.TLSCertNotAfter = f.CertNotAfter.UTC().Format(time.RFC3339)
	r.TLSRenewal = f.Renewal
	r.TLSIssuer = f.Issuer
	r.TLSCASecret = f.Secret.String()
}

// CommitLogin writes l into owner's Secret (the leader's agent, once etcd holds l's login): from then on
// applications reading the Secret log in with it. The Secret must still be this cluster's.
func (c *Certs) CommitLogin(ctx context.Context, owner, secret string, l Login) error {
	id := identity{secret: secret, cn: owner, owned: true}
	data, version, found, err := c.getIdentity(ctx, id)
	if err != nil {
		return fmt.Errorf("reading Secret %s: %w", secret, err)
	}
	if !found {
		return fmt.Errorf("Secret %s is gone", secret)
	}
	if err := c.Store.Update(ctx, secret, version, l.put(data)); err != nil {
		return fmt.Errorf("writing Secret %s: %w", secret, err)
	}
	if c.Logins == nil {
		c.Logins = map[string]Login{}
	}
	c.Logins[owner] = l
	return nil
}

// loginGrace is how long a replaced login keeps working: the grace of a CA rotation's client Secret
// (spec.security.tls.builtIn.rotationGrace, defaulted by the hook; 0 retires it at once), the time for
// mounted copies of a Secret to follow.
func (c *Certs) loginGrace() time.Duration { return c.ClientGrace }
