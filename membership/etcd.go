package membership

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// Etcd performs membership calls with the retry policy of docs/design/08-safety-rules.md §8.14. Every call group makes a fresh
// client: one created before a port listens waits out gRPC's reconnect backoff.
type Etcd struct {
	Log *slog.Logger
	// CallTimeout bounds one call; Retry, Unknown and the 5-second rule are handled around it.
	CallTimeout time.Duration
	// TLSDir, when set, holds the client identity (tls.crt, tls.key, ca.crt): read again for every
	// client, so a renewed certificate is used from the next call group on.
	TLSDir string
	// Login, when set, makes the calls log in as root with the password it returns: the client plane
	// requires no certificate, so etcd takes no user from one (api.AuthConfig.Passwords). The token is
	// kept across calls (a login costs etcd a bcrypt comparison and a raft round) until etcd refuses it.
	Login func() (password string, err error)
	// LoginEndpoints: where to log in when the call's own endpoints refuse (a learner serves no login);
	// the token is the cluster's, good on every member.
	LoginEndpoints []string
	mu             sync.Mutex
	token          string
	// noLogin: the last login found etcd's auth off, or failed (etcd not answering yet, a learner): calls
	// go without a token until etcd refuses one for want of it (tokenRefused), rather than each waiting
	// on a login first. A refusal means etcd answers, so the login is tried again exactly when it can work.
	noLogin bool
}

// PasswordFile is a Login reading the password from a file (a mounted root Secret's key).
func PasswordFile(path string) func() (string, error) {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("root password: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
}

// ClientTLS reads a client tls.Config from dir (tls.crt, tls.key, ca.crt read as one set).
func ClientTLS(dir string) (*tls.Config, error) {
	files, err := pki.ReadFiles(dir, pki.KeyCert, pki.KeyKey, pki.KeyCA)
	if err != nil {
		return nil, fmt.Errorf("client certificate in %s: %w", dir, err)
	}
	tc, err := ClientTLSFromFiles(files)
	if err != nil {
		return nil, fmt.Errorf("client certificate in %s: %w", dir, err)
	}
	return tc, nil
}

// ClientTLSFromFiles is a client tls.Config from a cert-manager-layout set (a Secret's data, or the
// files of a directory).
func ClientTLSFromFiles(files map[string][]byte) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(files[pki.KeyCert], files[pki.KeyKey])
	if err != nil {
		return nil, err
	}
	cas, err := pki.ParseCertificates(files[pki.KeyCA])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pki.KeyCA, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pki.Pool(cas...), MinVersion: tls.VersionTLS12}, nil
}

// ReloadingClientTLS is a client tls.Config that takes its certificate and the CAs it trusts from load
// at every handshake, not once: a long-lived client (a writer, a user's service) then follows a renewal
// and a CA rotation (docs/design/14-tls.md §14.6) the way etcd follows its own files, where a config read once
// would, after the rotation, neither trust the members' new certificates nor be trusted by them. The
// server's chain and name are verified against the CAs of that handshake (VerifyConnection; the
// built-in verification is off only because its roots are fixed at creation).
func ReloadingClientTLS(load func() (map[string][]byte, error)) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verified in VerifyConnection against the CAs loaded for this handshake
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			files, err := load()
			if err != nil {
				return nil, err
			}
			pair, err := tls.X509KeyPair(files[pki.KeyCert], files[pki.KeyKey])
			if err != nil {
				return nil, err
			}
			return &pair, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			files, err := load()
			if err != nil {
				return err
			}
			cas, err := pki.ParseCertificates(files[pki.KeyCA])
			if err != nil {
				return fmt.Errorf("%s: %w", pki.KeyCA, err)
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			opts := x509.VerifyOptions{DNSName: cs.ServerName, Roots: pki.Pool(cas...), Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err = cs.PeerCertificates[0].Verify(opts)
			return err
		},
	}
}

func (e *Etcd) log() *slog.Logger {
	if e.Log == nil {
		return slog.Default()
	}
	return e.Log
}

func (e *Etcd) callTimeout() time.Duration {
	if e.CallTimeout == 0 {
		return 5 * time.Second
	}
	return e.CallTimeout
}

func (e *Etcd) client(eps []string) (*clientv3.Client, error) {
	if len(eps) == 0 {
		return nil, errors.New("no etcd endpoints")
	}
	var tc *tls.Config
	// Only for https endpoints: in a TLS switch's transition from plaintext the agent talks http before
	// its certificate files exist.
	if e.TLSDir != "" && slices.ContainsFunc(eps, func(ep string) bool { return strings.HasPrefix(ep, "https://") }) {
		var err error
		if tc, err = ClientTLS(e.TLSDir); err != nil {
			return nil, err
		}
	}
	cfg := clientv3.Config{
		TLS:                  tc,
		Endpoints:            eps,
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	}
	if e.Login != nil {
		tok, err := e.loginToken(cfg)
		if err != nil {
			return nil, err
		}
		cfg.Token = tok
	}
	return clientv3.New(cfg)
}

// loginToken is root's token: the one kept, else a fresh login. "" while etcd's auth is off, and ""
// when no login succeeded (logged): the call is then made without one, and fails with etcd's reason if
// it needs one (a learner's own status needs none), which makes the next call log in again.
func (e *Etcd) loginToken(cfg clientv3.Config) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token != "" || e.noLogin {
		return e.token, nil
	}
	pw, err := e.Login()
	if err != nil {
		return "", err
	}
	tries := [][]string{cfg.Endpoints}
	if len(e.LoginEndpoints) > 0 && !slices.Equal(e.LoginEndpoints, cfg.Endpoints) {
		tries = append(tries, e.LoginEndpoints)
	}
	var errs []error
	for _, eps := range tries {
		c := cfg
		c.Endpoints = eps
		tok, err := e.login(c, pw)
		switch {
		case errors.Is(err, rpctypes.ErrAuthNotEnabled):
			e.noLogin = true
			return "", nil
		case err == nil:
			e.token = tok
			return tok, nil
		}
		errs = append(errs, err)
	}
	e.log().Warn("logging in as root failed: calling without a token", "error", errors.Join(errs...))
	e.noLogin = true
	return "", nil
}

// login logs in as root through cfg's endpoints.
func (e *Etcd) login(cfg clientv3.Config, password string) (string, error) {
	c, err := clientv3.New(cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), e.callTimeout())
	defer cancel()
	resp, err := c.Authenticate(ctx, api.RootUser, password)
	if err != nil {
		return "", err
	}
	return resp.Token, nil
}

// tokenRefused forgets root's token when etcd refused it (expired, invalidated by a password change, or
// none sent while auth is now on), and says so: the caller tries once more with a fresh login.
func (e *Etcd) tokenRefused(err error) bool {
	if e.Login == nil || err == nil {
		return false
	}
	if !errors.Is(rpctypes.Error(err), rpctypes.ErrInvalidAuthToken) && !errors.Is(rpctypes.Error(err), rpctypes.ErrUserEmpty) &&
		!errors.Is(rpctypes.Error(err), rpctypes.ErrAuthOldRevision) {
		return false
	}
	e.forgetToken()
	return true
}

// forgetToken drops root's token: the next call logs in afresh.
func (e *Etcd) forgetToken() {
	e.mu.Lock()
	e.token, e.noLogin = "", false
	e.mu.Unlock()
}

// List is a member list with the IDs it was read with.
type List struct {
	Members   []api.Member
	ClusterID uint64
	// From is the member that answered.
	From uint64
}

func toMembers(ms []*etcdserverpb.Member) []api.Member {
	out := make([]api.Member, 0, len(ms))
	for _, m := range ms {
		em := api.Member{ID: api.FormatID(m.ID), Name: m.Name, Learner: m.IsLearner}
		if len(m.PeerURLs) > 0 {
			em.PeerURL = m.PeerURLs[0]
		}
		if len(m.ClientURLs) > 0 {
			em.ClientURL = m.ClientURLs[0]
		}
		// A member added but never started has no client URLs (etcd publishes its name and client URLs
		// together at its first start). It may have a name: a static initial cluster names every member.
		em.Started = len(m.ClientURLs) > 0
		out = append(out, em)
	}
	return out
}

// MemberList reads the linearizable member list through the first endpoint that answers, one endpoint
// at a time so that a learner or a dead endpoint cannot stall the read.
func (e *Etcd) MemberList(ctx context.Context, eps []string) (List, error) {
	var lastErr error
	for _, ep := range eps {
		l, err := e.memberListAt(ctx, ep)
		if err == nil {
			return l, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr == nil {
		lastErr = errors.New("no endpoints")
	}
	return List{}, lastErr
}

func (e *Etcd) memberListAt(ctx context.Context, ep string) (List, error) {
	var l List
	err := e.onEndpoint(ctx, ep, e.callTimeout(), func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.MemberList(ctx)
		if err != nil {
			return fmt.Errorf("member list via %s: %w", ep, err)
		}
		l = List{Members: toMembers(resp.Members), ClusterID: resp.Header.ClusterId, From: resp.Header.MemberId}
		return nil
	})
	return l, err
}

// Status asks one endpoint about itself.
func (e *Etcd) Status(ctx context.Context, ep string) (st *clientv3.StatusResponse, err error) {
	err = e.onEndpoint(ctx, ep, 2*time.Second, func(ctx context.Context, c *clientv3.Client) error {
		st, err = c.Status(ctx, ep)
		return err
	})
	return st, err
}

// onEndpoint runs call with a fresh client of ep (see Etcd), bounded by timeout.
func (e *Etcd) onEndpoint(ctx context.Context, ep string, timeout time.Duration, call func(context.Context, *clientv3.Client) error) error {
	return e.withClient([]string{ep}, func(c *clientv3.Client) error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return call(cctx, c)
	})
}

// withClient runs call with a client of eps, closed when call returns; once more with a fresh login
// when etcd refused root's token.
func (e *Etcd) withClient(eps []string, call func(*clientv3.Client) error) error {
	err := e.withClientOnce(eps, call)
	if e.tokenRefused(err) {
		err = e.withClientOnce(eps, call)
	}
	return err
}

func (e *Etcd) withClientOnce(eps []string, call func(*clientv3.Client) error) error {
	c, err := e.client(eps)
	if err != nil {
		return err
	}
	defer c.Close()
	return call(c)
}

// Defragment defragments the member at ep (its reads and writes wait meanwhile: seconds per GiB).
func (e *Etcd) Defragment(ctx context.Context, ep string, timeout time.Duration) error {
	return e.onEndpoint(ctx, ep, timeout, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.Defragment(ctx, ep); err != nil {
			return fmt.Errorf("defragment %s: %w", ep, err)
		}
		return nil
	})
}

// Compact compacts the keyspace up to rev through ep (a revision already compacted is not an error).
func (e *Etcd) Compact(ctx context.Context, ep string, rev int64) error {
	return e.onEndpoint(ctx, ep, time.Minute, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return fmt.Errorf("compact to %d via %s: %w", rev, ep, err)
		}
		return nil
	})
}

// DisarmNoSpace disarms the NOSPACE alarm member raised, through ep.
func (e *Etcd) DisarmNoSpace(ctx context.Context, ep string, member uint64) error {
	return e.onEndpoint(ctx, ep, e.callTimeout(), func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: member, Alarm: etcdserverpb.AlarmType_NOSPACE})
		return err
	})
}

// Alarms lists the cluster's active alarms through one endpoint as "<TYPE>@<member ID>", sorted.
func (e *Etcd) Alarms(ctx context.Context, ep string) ([]string, error) {
	var resp *clientv3.AlarmResponse
	err := e.onEndpoint(ctx, ep, 2*time.Second, func(ctx context.Context, c *clientv3.Client) (err error) {
		resp, err = c.AlarmList(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("alarm list via %s: %w", ep, err)
	}
	var out []string
	for _, a := range resp.Alarms {
		out = append(out, a.Alarm.String()+"@"+api.FormatID(a.MemberID))
	}
	sort.Strings(out)
	return out, nil
}

// retry runs call until it is done, failed, or ctx ends; Unknown outcomes are settled by verify.
func (e *Etcd) retry(ctx context.Context, op Op, what string, call func(context.Context) error, verify func(context.Context) (bool, error)) error {
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, e.callTimeout())
		err := call(cctx)
		cancel()
		out := Classify(op, err)
		switch out {
		case Done:
			return nil
		case Failed:
			return fmt.Errorf("%s: %w", what, err)
		case Unknown:
			if ok, verr := verify(ctx); verr == nil && ok {
				return nil
			}
		}
		e.log().Info("retrying", "op", what, "attempt", attempt, "outcome", out.String(), "error", err)
		wait := 500 * time.Millisecond
		switch {
		case errors.Is(err, rpctypes.ErrUnhealthy):
			// etcd refuses a member change until its leader has been connected to the voters for 5 s
			// (after a start or a promote): retry soon, that wait is etcd's and ends on its own.
			wait = 200 * time.Millisecond
		case op == OpAdd:
			wait = 1100 * time.Millisecond // a same-second re-add collides with the removed ID
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

// AddLearner adds peerURL as a learner (or finds it already added) and returns its ID and the member
// list that includes it.
func (e *Etcd) AddLearner(ctx context.Context, eps []string, peerURL string) (uint64, []api.Member, error) {
	var id uint64
	var members []api.Member
	find := func(ctx context.Context) (bool, error) {
		l, err := e.MemberList(ctx, eps)
		if err != nil {
			return false, err
		}
		for _, m := range l.Members {
			if samePeer(m.PeerURL, peerURL) {
				// Only a learner that never started may be taken over: anything else at this peer URL
				// has data somewhere, and its ID must not be reused on an empty directory.
				if !m.Learner || m.Started {
					return false, fmt.Errorf("peer URL %s belongs to started member %s", peerURL, m.ID)
				}
				id, _ = api.ParseID(m.ID)
				members = l.Members
				return true, nil
			}
		}
		return false, nil
	}
	err := e.retry(ctx, OpAdd, "add learner "+peerURL, func(ctx context.Context) error {
		return e.withClient(eps, func(c *clientv3.Client) error {
			resp, err := c.MemberAddAsLearner(ctx, []string{peerURL})
			if err == nil {
				id = resp.Member.ID
				members = toMembers(resp.Members)
			}
			return err
		})
	}, find)
	if err != nil {
		return 0, nil, err
	}
	if id == 0 { // Done through ErrPeerURLExist: look it up
		if ok, err := find(ctx); err != nil || !ok {
			return 0, nil, fmt.Errorf("add learner %s: already present but not found in the member list: %v", peerURL, err)
		}
	}
	return id, members, nil
}

// Promote retries MemberPromote until etcd accepts (the learner has caught up) or ctx ends.
func (e *Etcd) Promote(ctx context.Context, eps []string, id uint64) error {
	return e.changeMember(ctx, OpPromote, "promote", eps, id, func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.MemberPromote(ctx, id)
		return err
	}, func(present, learner bool) bool { return !present || !learner })
}

// changeMember retries change (what: "promote", "remove"), a change of member id through a client of
// eps, with retry's rules: an Unknown outcome is done when done says so of what the member list shows
// of id.
func (e *Etcd) changeMember(ctx context.Context, op Op, what string, eps []string, id uint64,
	change func(context.Context, *clientv3.Client) error, done func(present, learner bool) bool) error {
	return e.retry(ctx, op, what+" "+api.FormatID(id), func(ctx context.Context) error {
		return e.withClient(eps, func(c *clientv3.Client) error { return change(ctx, c) })
	}, func(ctx context.Context) (bool, error) {
		present, learner, err := e.memberState(ctx, eps, id)
		return done(present, learner), err
	})
}

// memberState says whether id is in the member list, and whether as a learner.
func (e *Etcd) memberState(ctx context.Context, eps []string, id uint64) (present, learner bool, err error) {
	l, err := e.MemberList(ctx, eps)
	if err != nil {
		return false, false, err
	}
	for _, m := range l.Members {
		if m.ID == api.FormatID(id) {
			return true, m.Learner, nil
		}
	}
	return false, false, nil
}

// Remove removes member id (idempotent: already removed is done).
func (e *Etcd) Remove(ctx context.Context, eps []string, id uint64) error {
	return e.changeMember(ctx, OpRemove, "remove", eps, id, func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.MemberRemove(ctx, id)
		return err
	}, func(present, _ bool) bool { return !present })
}

// MoveLeader asks the leader (at leaderEP) to hand leadership to transferee.
func (e *Etcd) MoveLeader(ctx context.Context, leaderEP string, transferee uint64) error {
	return e.onEndpoint(ctx, leaderEP, 10*time.Second, func(ctx context.Context, c *clientv3.Client) error {
		_, err := c.MoveLeader(ctx, transferee)
		return err
	})
}

// Health probes every voter of l through its own client URL: a voter is healthy when it answers
// Status without errors (a NOSPACE alarm aside, statusHealthy) and knows a leader.
func (e *Etcd) Health(ctx context.Context, members []api.Member) map[string]*clientv3.StatusResponse {
	out := map[string]*clientv3.StatusResponse{}
	for _, m := range members {
		if m.ClientURL == "" {
			continue
		}
		st, err := e.Status(ctx, m.ClientURL)
		if err != nil || st.Leader == 0 || api.FormatID(st.Header.MemberId) != m.ID {
			continue
		}
		if len(st.Errors) > 0 {
			// A NOSPACE alarm (one Status error per alarm) is not an error of the member (statusHealthy).
			alarms, aerr := e.Alarms(ctx, m.ClientURL)
			if aerr != nil || !statusHealthy(len(st.Errors), alarms, st.Leader) {
				continue
			}
		}
		out[m.ID] = st
	}
	return out
}

// QuorumAllows applies the quorum rule (docs/design/08-safety-rules.md §8.2) to removing target from members, given which are healthy.
func QuorumAllows(members []api.Member, healthy map[string]*clientv3.StatusResponse, target string) error {
	all, up, targetUp, learner := 0, 0, false, false
	for _, m := range members {
		if m.ID == target && m.Learner {
			learner = true
		}
		if m.Learner {
			continue
		}
		all++
		if healthy[m.ID] != nil {
			up++
			targetUp = targetUp || m.ID == target
		}
	}
	return api.RemovalAllowed(all, up, learner, targetUp)
}

// voterEndpoints are the client URLs of the started voters of ms, except skip.
func voterEndpoints(ms []api.Member, skip string) []string {
	var eps []string
	for _, m := range ms {
		if !m.Learner && m.ClientURL != "" && m.ID != skip {
			eps = append(eps, m.ClientURL)
		}
	}
	return eps
}

// statusHealthy: a member with a leader and no error in its Status, where a NOSPACE alarm (one error per
// alarm) is not an error of the member: raft works, reads and deletes are served, the pod stays ready
// (etcd's /readyz ignores it), and compaction, defragmentation and membership steps, which it does not
// stop, must still be allowed; DatabaseFull says it instead of a false QuorumLost. Any other error
// (no leader, CORRUPT, an alarm list that could not be read) is unhealthy.
func statusHealthy(errors int, alarms []string, leader uint64) bool {
	if leader == 0 {
		return false
	}
	if errors == 0 {
		return true
	}
	if len(alarms) != errors {
		return false
	}
	for _, a := range alarms {
		if typ, _, _ := strings.Cut(a, "@"); typ != api.AlarmNoSpace {
			return false
		}
	}
	return true
}

// Client is a client of eps with e's identity (the TLS directory, root's login), for a caller that keeps
// it open (a standby's applier); the caller closes it.
func (e *Etcd) Client(eps []string) (*clientv3.Client, error) { return e.client(eps) }
