package sync

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// etcd's users and roles (docs/design/20-auth.md). The hook decides what the agents apply: spec.auth
// normalised, with the rotation a user's token asks for (api.AnnRotateUser), rendered as the
// ConfigMap's auth.json; the leader's agent applies it and reports (api.AuthReport), and the hook shows
// that report in status.auth and AuthOutOfSync. Nothing is recorded: each sync derives it again.

// decideAuth is the auth config of the spec in force (nil without spec.auth). A rotation token for a
// user not declared is ignored, and said.
func (p *plan) decideAuth() *api.AuthConfig {
	if !p.HasSpec || p.Spec.Auth == nil {
		return nil
	}
	var rotations map[string]string
	if v := strings.TrimSpace(p.f.Parent.Annotations[api.AnnRotateUser]); v != "" {
		user, token, err := api.ParseRotateUser(v)
		switch {
		case err != nil:
			p.distrust("%s: ignored", err)
		case !slices.ContainsFunc(p.Spec.Auth.Users, func(u api.AuthUser) bool { return u.Name == user }):
			p.distrust("%s names user %q, which spec.auth.users does not declare: ignored", api.AnnRotateUser, user)
		default:
			rotations = map[string]string{user: api.RenewalMark(token)}
		}
	}
	return api.DesiredAuthRotated(p.f.Names, p.Spec.Auth, !p.Spec.Security.TLS.ClientAuth(), rotations)
}

// authRemovalRefused refuses removing spec.auth while the leader's agent reports etcd enforcing
// authentication (rep), even though the recorded spec already says enabled: false: api.ValidateChange
// checks only the record, and the agents apply enabled: false a look later. Once auth.json is gone no
// agent disables auth (etcd's auth is left as it is), and the Jobs fall back to the shared client
// Secret, which is no etcd user (docs/design/20-auth.md §20.6). Without a report nothing is known, and
// nothing refused.
func authRemovalRefused(recorded *api.ClusterSpec, next api.ClusterSpec, rep *api.AuthReport) []api.Problem {
	if recorded == nil || recorded.Auth == nil || next.Auth != nil || rep == nil || !rep.Enabled {
		return nil
	}
	return []api.Problem{{Reason: "InvalidAuth", Message: "spec.auth cannot be removed while etcd still enforces authentication (status.auth.enabled): the leader's agent has not applied enabled: false yet; remove spec.auth once it has"}}
}

// authStatus and its condition: where etcd's auth stands against the declaration.
func (p *plan) authStatus(add func(typ string, ok bool, reason, msg string)) *api.AuthStatus {
	want := p.Auth
	if want == nil {
		return nil
	}
	rep := p.f.AuthReport()
	st := &api.AuthStatus{Declared: want.Hash}
	if rep != nil {
		st.Enabled, st.Applied, st.LastReverted = rep.Enabled, rep.Applied, rep.Reverted
	}
	var problems []string
	for _, u := range want.Users {
		us := api.AuthUserStatus{Name: u.Name, SecretName: u.SecretName}
		if rep != nil {
			if t, err := time.Parse(time.RFC3339, rep.Expires[u.Name]); err == nil {
				us.NotAfter = t.UTC().Format(time.RFC3339)
			}
			if e := rep.UserErrors[u.Name]; e != "" {
				us.Problem = api.Truncate(e, 256)
				problems = append(problems, fmt.Sprintf("user %s: %s", u.Name, us.Problem))
			}
		}
		st.Users = append(st.Users, us)
	}
	sort.Strings(problems)
	switch {
	case rep == nil:
		add(api.CondAuthOutOfSync, true, "NotReported", "no leader's agent reports etcd's users and roles yet")
	case rep.Error != "":
		add(api.CondAuthOutOfSync, true, "ApplyFailing", "applying spec.auth ("+want.Hash+"): "+api.Truncate(rep.Error, 512))
	case rep.Applied != want.Hash:
		add(api.CondAuthOutOfSync, true, "Applying", fmt.Sprintf("etcd's users and roles are being brought to spec.auth (%s)", want.Hash))
	case len(problems) > 0:
		add(api.CondAuthOutOfSync, true, "UserSecretNotKept", strings.Join(problems, "; "))
	default:
		msg := fmt.Sprintf("etcd's users and roles are as spec.auth declares (%s); authentication %s", want.Hash, map[bool]string{true: "enforced", false: "not enforced (spec.auth.enabled is false)"}[rep.Enabled])
		if rep.Reverted != "" {
			msg += "; last hand edit put back: " + api.Truncate(rep.Reverted, 512)
		}
		add(api.CondAuthOutOfSync, false, "InSync", msg)
	}
	return st
}

// userCertsExpiring lists the users whose certificate expires before soon (CertificatesExpiring).
func (p *plan) userCertsExpiring(st *api.AuthStatus, soon time.Time) []string {
	if st == nil {
		return nil
	}
	var out []string
	for _, u := range st.Users {
		if t, err := time.Parse(time.RFC3339, u.NotAfter); err == nil && t.Before(soon) {
			out = append(out, fmt.Sprintf("user %s's certificate (Secret %s) expires %s", u.Name, u.SecretName, u.NotAfter))
		}
	}
	return out
}
