package standby

import (
	"slices"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// ReadRole is the role a fenced standby gives the clients that shared the cluster's client identity:
// read every key.
const ReadRole = "etcdhook-standby-read"

// ClientUser is the etcd user of the cluster's shared client certificate (its CN): without auth every
// holder of it is root; on a fenced standby it reads only.
const ClientUser = pki.Organization

// Fence is the auth a standby declares while it is one (docs/design/21-standby.md §21.5): etcd's own
// authorisation refuses every write but the applier's (root), and serves reads as the declaration
// allows them. It is a declaration like spec.auth, applied and kept by the agents (§20) from the hook's
// auth.json, so nothing fights it, and promotion is declaring spec.auth again: the agents grant back
// what the fence took. From want (spec.auth, nil when not set):
//
//   - auth is enabled, whatever want says;
//   - every declared role keeps its reads (readwrite becomes read) and loses its writes;
//   - the users keep their roles;
//   - without auth on the primary's terms (want nil or not enabled) every client was root through the
//     shared client certificate: its user ClientUser gets ReadRole, read on every key.
//
// want is not changed.
func Fence(want *api.AuthSpec) *api.AuthSpec {
	out := &api.AuthSpec{Enabled: true}
	if want != nil {
		for _, r := range want.Roles {
			fr := api.AuthRole{Name: r.Name}
			for _, p := range r.Permissions {
				switch p.Access {
				case api.AccessRead, api.AccessReadWrite:
					p.Access = api.AccessRead
					fr.Permissions = append(fr.Permissions, p)
				}
			}
			out.Roles = append(out.Roles, fr)
		}
		for _, u := range want.Users {
			u.Roles = slices.Clone(u.Roles)
			out.Users = append(out.Users, u)
		}
	}
	if want == nil || !want.Enabled {
		out.Roles = append(out.Roles, api.AuthRole{Name: ReadRole, Permissions: []api.AuthPermission{{Key: "", Prefix: true, Access: api.AccessRead}}})
		i := slices.IndexFunc(out.Users, func(u api.AuthUser) bool { return u.Name == ClientUser })
		if i < 0 {
			out.Users = append(out.Users, api.AuthUser{Name: ClientUser})
			i = len(out.Users) - 1
		}
		out.Users[i].Roles = append(out.Users[i].Roles, ReadRole)
	}
	return out
}

// Lift is the declaration that ends the fence at promotion: spec.auth again, or, without it, nothing
// declared and auth off, which removes the fence's role and user (a spec without auth otherwise
// leaves etcd's auth alone, and the promoted cluster would stay read-only).
func Lift(want *api.AuthSpec) *api.AuthSpec {
	if want != nil {
		return want
	}
	return &api.AuthSpec{}
}
