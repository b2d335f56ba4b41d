package membership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// etcd's users and roles (docs/design/20-auth.md): the agent of the leader keeps etcd's auth as spec.auth
// declares it. One writer at a time (the leader's agent; a new leader's agent takes over), so two agents
// never undo each other's steps.

const (
	// authRead: how often the declared auth (the ConfigMap's auth.json) is read again.
	authRead = 10 * time.Second
	// authLook: how often the leader's agent asks etcd for its auth revision: a hand edit moves it, and
	// is put back at the next look.
	authLook = 5 * time.Second
	// authRetry: the wait after a reconcile that failed.
	authRetry = 10 * time.Second
	// authReadIdle: how often the declaration is read while there is none and the Lease hints at none
	// (a fallback: the hook's hint, etcd.io/auth-declared, makes the agents read it at once).
	authReadIdle = 5 * time.Minute
)

// authKeeper keeps etcd's users and roles as spec.auth declares them while this member leads, and
// points the agent's own etcd calls at the root identity. Its fields are what it keeps between looks.
type authKeeper struct {
	*env
	rep *reporter

	want   *api.AuthConfig
	readAt time.Time
	// hint: the hash of the declaration the hook writes on the Lease (etcd.io/auth-declared).
	hint string
	// wantErr: why the declared auth could not be read (the last good one is kept).
	wantErr string
	// lookAt: the last look at etcd; revision: the auth revision it held after the last reconcile that
	// finished; applied: the hash of the config that reconcile made true.
	lookAt   time.Time
	revision uint64
	applied  string
	failedAt time.Time
	report   api.AuthReport
	// passwords: the fingerprint of the passwords that reconcile made true (a Secret's new password,
	// after a rotation, is set at the next look); set: the password this agent last set for each user
	// (with auth off, no login can check one).
	passwords string
	set       map[string]string
	// setAt: the auth revision right after this agent's last pass: with auth off, the passwords in set
	// are known right only while etcd's auth is still at it.
	setAt uint64
	// next: the logins rotations are making, by user, until the user's Secret names them (login.go).
	next map[string]Login
}

// read reads the declared auth at most every authRead; a failed read keeps the last one. recheck: a
// new declaration came, whose users get their Secrets at the next certificate look, not a minute later.
func (k *authKeeper) read(ctx context.Context) (recheck bool) {
	every := k.every(authRead)
	if k.want == nil {
		every = k.every(authReadIdle)
	}
	// The Lease says the declaration changed: read it now (at most once a tick, and on the timer while
	// reads fail: the ConfigMap may lag the Lease by a moment, or be unreadable).
	if k.hint != "" && (k.want == nil || k.want.Hash != k.hint) && k.wantErr == "" {
		every = min(every, k.tick())
	}
	if k.cfg.AuthSource == nil || time.Since(k.readAt) < every && !k.readAt.IsZero() {
		return
	}
	k.readAt = time.Now()
	want, err := k.cfg.AuthSource(ctx)
	if err != nil {
		k.wantErr = err.Error()
		return
	}
	if want != nil && (k.want == nil || want.Hash != k.want.Hash) {
		recheck = true
	}
	k.wantErr, k.want = "", want
	if k.certs != nil {
		k.certs.Users, k.certs.Rotations = nil, nil
		if want != nil {
			k.certs.Users, k.certs.Rotations = want.Users, want.Rotations
			// Kept for the agent's life once declared: the agent's own calls use the root identity from
			// then on (useRootIdentity), which must go on being renewed.
			k.certs.RootSecret = want.RootSecret
		}
	}
	return recheck
}

// reconcile runs on the leader's agent at each look: it reads etcd's auth revision every authLook
// and, when the revision moved since the last reconcile or the declared auth changed, reads etcd's users
// and roles and applies the difference. A difference found while the declaration did not change is a
// hand edit: it is put back and reported (Event AuthReverted, report's reverted). recheck: the
// certificates are to be looked at now (a new declaration, or this agent now issues the users').
func (k *authKeeper) reconcile(ctx context.Context, r *api.Report) (recheck bool) {
	if k.cfg.AuthSource == nil {
		return false
	}
	recheck = k.read(ctx)
	want := k.want
	if want == nil {
		return // spec.auth not set: etcd's auth is not etcdhook's to keep
	}
	if k.certs != nil && !k.certs.IssueUsers {
		// The leader's agent issues the users' certificates: at once, not at the next certificate look.
		k.certs.IssueUsers = true
		recheck = true
	}
	defer func() {
		rep := k.report
		rep.Expires, rep.UserErrors = nil, nil
		if k.certs != nil {
			for u, t := range k.certs.UserNotAfter {
				if rep.Expires == nil {
					rep.Expires = map[string]string{}
				}
				rep.Expires[u] = t.UTC().Format(time.RFC3339)
			}
			if len(k.certs.UserErrors) > 0 {
				rep.UserErrors = k.certs.UserErrors
			}
		}
		if k.wantErr != "" && rep.Error == "" {
			rep.Error = "reading the declared auth: " + k.wantErr
		}
		r.Auth = &rep
	}()
	k.rotateLogins(want)
	passwords := k.wantPasswords(want)
	pwPrint := fingerprint(passwords)
	changed := want.Hash != k.applied || pwPrint != k.passwords
	if !changed && time.Since(k.lookAt) < k.every(authLook) {
		return
	}
	if !k.failedAt.IsZero() && time.Since(k.failedAt) < k.every(authRetry) {
		return
	}
	k.lookAt = time.Now()
	waitRoot := false
	err := k.etcd.onEndpoint(ctx, k.cfg.ClientURL, 10*time.Second, func(ctx context.Context, cl *clientv3.Client) error {
		if !changed {
			s, err := cl.AuthStatus(ctx)
			if err != nil {
				return fmt.Errorf("auth status: %w", err)
			}
			if s.AuthRevision == k.revision && s.Enabled == want.Enabled {
				return nil
			}
		}
		have, err := ReadAuth(ctx, cl)
		if err != nil {
			return err
		}
		if err := CheckPasswords(ctx, cl, &have, passwords, k.set, k.setAt != 0 && have.Revision == k.setAt); err != nil {
			return err
		}
		steps := PlanAuth(want, have, passwords)
		if len(steps) > 0 && steps[len(steps)-1].Op == OpEnableAuth && !k.everyMemberUsesRoot(ctx) {
			// Every agent's own calls (promotions, leadership moves, defragmentation) must present the
			// root identity before etcd refuses the others: the rest is applied, the switch waits.
			steps = steps[:len(steps)-1]
			waitRoot = true
		}
		drift := !changed && len(steps) > 0
		var made []string
		enabled := false
		err = ApplyAuth(ctx, cl, steps, func(s AuthStep) {
			made = append(made, s.String())
			switch s.Op {
			case OpAddUser, OpSetPassword, OpRemakeUser:
				if k.set == nil {
					k.set = map[string]string{}
				}
				k.set[s.User] = s.Password
			case OpEnableAuth:
				enabled = true
			}
			k.log.Info("auth change", "change", s.String(), "config", want.Hash, "handEdit", drift)
		})
		if len(made) > 0 {
			if drift {
				k.event(EventAuthReverted, "ReconcileAuth", true, "put back what a hand edit changed in etcd's users and roles: %s", strings.Join(made, "; "))
				k.report.Reverted = time.Now().UTC().Format(time.RFC3339) + " " + strings.Join(made, "; ")
			} else {
				k.event(EventAuthChanged, "ReconcileAuth", false, "etcd's users and roles now as spec.auth declares (%s): %s", want.Hash, strings.Join(made, "; "))
			}
		}
		if err != nil {
			return err
		}
		if waitRoot {
			return errors.New("auth is enabled once every member's agent presents the root identity (etcd.io/root-identity on its Lease)")
		}
		s, err := cl.AuthStatus(ctx)
		if err != nil {
			return fmt.Errorf("auth status: %w", err)
		}
		// The revision this pass read, not the one now: a hand edit made while the pass ran (its logins
		// take a moment) is after it, so the next look sees the revision move and plans again. A pass
		// that changed something sees its own changes that way too, once: that pass finds nothing to do.
		// With auth off, the passwords this agent set count as right only at the revision now (setAt):
		// a password edited by hand while this pass ran is missed then, and put back once auth is on,
		// when every password is checked by a login.
		k.revision, k.setAt, k.applied, k.passwords = have.Revision, s.AuthRevision, want.Hash, pwPrint
		if enabled {
			// Passwords set while auth was off could not be checked: the next look logs in as each user
			// (a hand edit made while it was off is then put back).
			k.revision = 0
		}
		k.report.Applied, k.report.Enabled = want.Hash, s.Enabled
		return nil
	})
	if err == nil {
		err = k.commitLogins(ctx, want)
	}
	if err != nil {
		k.failedAt = time.Now()
		k.report.Error = err.Error()
		k.log.Warn("auth reconcile", "error", err)
		return
	}
	k.failedAt, k.report.Error = time.Time{}, ""
	return recheck
}

// rotateLogins starts a password rotation for each user whose rotation mark its login was not made for:
// the next login (the other slot, a new password) is what etcd must hold from this pass on, before the
// Secret names it (commitLogins).
func (k *authKeeper) rotateLogins(want *api.AuthConfig) {
	if k.certs == nil {
		return
	}
	for _, u := range want.Users {
		mark := want.Rotations[u.Name]
		l, ok := k.certs.Logins[u.Name]
		if mark == "" || !ok || l.Mark == mark || k.next[u.Name].Mark == mark {
			continue
		}
		next, err := l.next(u.Name, mark, time.Now(), k.certs.loginGrace())
		if err != nil {
			k.log.Warn("rotating a login", "user", u.Name, "error", err)
			continue
		}
		if k.next == nil {
			k.next = map[string]Login{}
		}
		k.next[u.Name] = next
		k.log.Info("rotating a user's password login", "user", u.Name, "from", l.User, "to", next.User, "until", next.PreviousUntil)
	}
}

// commitLogins, once etcd holds every login the pass planned, points the users' Secrets at the logins
// rotations made, and drops from them the previous logins whose grace is over (etcd no longer holds
// them).
func (k *authKeeper) commitLogins(ctx context.Context, want *api.AuthConfig) error {
	if k.certs == nil {
		return nil
	}
	var errs []error
	now := time.Now()
	for _, u := range want.Users {
		l, pending := k.next[u.Name]
		if !pending {
			cur, ok := k.certs.Logins[u.Name]
			if !ok || !cur.retired(now) {
				continue
			}
			cur.Previous, cur.PreviousPassword, cur.PreviousUntil = "", "", time.Time{}
			l = cur
		}
		if err := k.certs.CommitLogin(ctx, u.Name, u.SecretName, l); err != nil {
			errs = append(errs, fmt.Errorf("user %s's login: %w", u.Name, err))
			continue
		}
		if pending {
			delete(k.next, u.Name)
			k.event(EventAuthChanged, "RotateLogin", false, "user %s's Secret now logs in as %s; %s works until %s", u.Name, l.User, l.Previous, l.PreviousUntil.UTC().Format(time.RFC3339))
		}
	}
	return errors.Join(errs...)
}

// stop is called when this member is no longer the leader: another agent keeps etcd's auth, and this
// one stops issuing the users' certificates.
func (k *authKeeper) stop() {
	if k.certs != nil {
		k.certs.IssueUsers = false
	}
	k.applied, k.revision, k.passwords, k.set, k.setAt, k.next = "", 0, "", nil, 0, nil
}

// wantPasswords are the logins etcd must hold, with their passwords: root's, and each declared user's
// as its Secret holds them (Certs.Logins) or as a rotation makes them (the next login, the current one
// as its previous); a user whose Secret this agent has not read yet is left out.
func (k *authKeeper) wantPasswords(want *api.AuthConfig) map[string]string {
	out := map[string]string{}
	if k.certs == nil {
		return out
	}
	if pw := k.certs.RootPassword; usablePassword(pw) {
		out[api.RootUser] = pw
	}
	now := time.Now()
	for _, u := range want.Users {
		l, ok := k.next[u.Name]
		if !ok {
			if l, ok = k.certs.Logins[u.Name]; !ok {
				continue
			}
		}
		maps.Copy(out, l.passwords(now))
	}
	return out
}

// useRootIdentity points the agent's own etcd client at the root identity's files once the certificate
// look wrote them: with auth on, only root may change membership, defragment or read the auth store.
// Without client certificates required (AuthConfig.Passwords) they log in as root with the root
// Secret's password instead, which etcd then needs to take them for root.
func (k *authKeeper) useRootIdentity() {
	c := k.certs
	if c == nil || c.RootSecret == "" || c.RootDir == "" {
		return
	}
	if k.etcd.TLSDir != c.RootDir {
		if _, err := pki.ReadFiles(c.RootDir, pki.KeyCert, pki.KeyKey, pki.KeyCA); err == nil {
			k.log.Info("the agent's etcd calls now use the root identity", "secret", c.RootSecret)
			k.etcd.TLSDir = c.RootDir
		}
	}
	login := k.want != nil && k.want.Passwords
	switch {
	case login && k.etcd.Login == nil:
		file := filepath.Join(c.RootDir, api.SecretKeyPassword)
		if _, err := os.Stat(file); err == nil {
			k.log.Info("the agent's etcd calls now log in as root (client certificates are not required)", "secret", c.RootSecret)
			k.etcd.Login, k.etcd.LoginEndpoints = PasswordFile(file), k.cfg.Endpoints
		}
	case !login && k.etcd.Login != nil:
		// Only while auth is not enforced (api.ValidateChange): the certificate says root again.
		k.log.Info("the agent's etcd calls present the root certificate again (client certificates are required)")
		k.etcd.Login = nil
		k.etcd.forgetToken()
	}
}

// usesRootIdentity says whether this agent's own etcd calls present the root identity (reported: the
// leader's agent enables auth only once every member's does, or their membership calls would be refused).
func (k *authKeeper) usesRootIdentity() bool {
	if k.certs == nil || k.certs.RootDir == "" || k.etcd.TLSDir != k.certs.RootDir {
		return false
	}
	return k.want == nil || !k.want.Passwords || k.etcd.Login != nil
}

// everyMemberUsesRoot says whether every member of the cluster (the last member list read) reports
// presenting the root identity; this agent's own included.
func (k *authKeeper) everyMemberUsesRoot(ctx context.Context) bool {
	if !k.usesRootIdentity() {
		return false
	}
	return k.rep.everyMember(ctx, func(r api.Report) bool { return r.RootIdentity })
}

// every is d, or Cfg.AuthLook when set (tests): one override for every auth interval.
func (k *authKeeper) every(d time.Duration) time.Duration {
	if k.cfg.AuthLook > 0 {
		return k.cfg.AuthLook
	}
	return d
}
