package steps

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// etcd's users and roles (docs/design/20-auth.md). The hook decides what the agents apply: spec.auth
// normalised, with the rotation a user's token asks for (api.AnnRotateUser), rendered as the
// ConfigMap's auth.json; the leader's agent applies it and reports (api.AuthReport), and the hook shows
// that report in status.auth and AuthOutOfSync. Nothing is recorded: each sync derives it again.

// AuthInput is what Auth reads of the decisions before it: the spec adopted (ChooseSpec, with the
// space overlay), if any.
type AuthInput struct {
	HasSpec bool
	Spec    api.ClusterSpec
}

// AuthDecision is the auth step's part of the decision.
type AuthDecision struct {
	// Config: the auth config the agents apply (Decision.Auth); nil without spec.auth.
	Config *api.AuthConfig
	// Distrusted: the rotation token ignored, if any, for InputIgnored (appended to Decision.Distrusted).
	Distrusted []string
}

// Auth is the auth config of the spec in force (nil without spec.auth). A rotation token for a user
// not declared is ignored, and said.
func Auth(f *facts.Facts, in AuthInput) AuthDecision {
	var d AuthDecision
	if !in.HasSpec || in.Spec.Auth == nil {
		return d
	}
	var rotations map[string]string
	if v := strings.TrimSpace(f.Parent.Annotations[api.AnnRotateUser]); v != "" {
		user, token, err := api.ParseRotateUser(v)
		switch {
		case err != nil:
			d.Distrusted = append(d.Distrusted, fmt.Sprintf("%s: ignored", err))
		case !slices.ContainsFunc(in.Spec.Auth.Users, func(u api.AuthUser) bool { return u.Name == user }):
			d.Distrusted = append(d.Distrusted, fmt.Sprintf("%s names user %q, which spec.auth.users does not declare: ignored", api.AnnRotateUser, user))
		default:
			rotations = map[string]string{user: api.RenewalMark(token)}
		}
	}
	d.Config = api.DesiredAuthRotated(f.Names, in.Spec.Auth, !in.Spec.Security.TLS.ClientAuth(), rotations)
	return d
}
