package render

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// authStatus and its condition: where etcd's auth stands against the declaration.
func authStatus(f *facts.Facts, d *steps.Decision, add func(typ string, ok bool, reason, msg string)) *api.AuthStatus {
	want := d.Auth
	if want == nil {
		return nil
	}
	rep := f.AuthReport()
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
func userCertsExpiring(st *api.AuthStatus, soon time.Time) []string {
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
