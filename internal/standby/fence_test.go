package standby

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/membership"
)

// The fence, declared as the agents declare spec.auth (membership.PlanAuth, ApplyAuth), makes etcd
// refuse the users' writes and serve their reads, while the applier (root) follows; Lift, declared
// the same way at promotion, gives the writes back. Logins by password (embedded etcd, no TLS); a
// certificate's CN is the same etcd user. On each etcd version.
func TestFence(t *testing.T) {
	forEachVersion(t, func(t *testing.T, version string) {
		ctx := context.Background()
		primary := startOn(t, version, filepath.Join(t.TempDir(), "primary"), "primary", freeURL(t))
		b := openBucket(t, filepath.Join(t.TempDir(), "bucket"))
		id := clusterID(t, primary)
		_, err := primary.Put(ctx, "/app/config", "1")
		require.NoError(t, err)
		m := fullSnapshot(t, primary, b)
		f := follow(t, primary, b, m, 1024)

		appRoles := &api.AuthSpec{Enabled: true,
			Roles: []api.AuthRole{{Name: "app", Permissions: []api.AuthPermission{{Key: "/app/", Prefix: true, Access: api.AccessReadWrite}, {Key: "/log", Access: api.AccessWrite}}}},
			Users: []api.AuthUser{{Name: "app", Roles: []string{"app"}}}}
		for _, tc := range []struct {
			name string
			spec *api.AuthSpec // the standby's spec.auth
			user string        // the etcd user a client logs in as
			key  string        // a key it may read (and write once promoted)
		}{
			{"without spec.auth", nil, ClientUser, "k01"},
			{"with spec.auth", appRoles, "app", "/app/config"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				standby := seedOn(t, version, b, m, "standby")
				endpoint := standby.Endpoints()[0]
				n := api.Names{Cluster: "standby", Namespace: ns}
				login := api.LoginSlot(tc.user, 1)
				passwords := map[string]string{api.RootUser: "root-pw", login: "user-pw"}
				declare := func(cl *clientv3.Client, spec *api.AuthSpec) {
					t.Helper()
					have, err := membership.ReadAuth(ctx, cl)
					require.NoError(t, err)
					steps := membership.PlanAuth(api.DesiredAuthRotated(n, spec, true, nil), have, passwords)
					require.NoError(t, membership.ApplyAuth(ctx, cl, steps, nil))
				}
				declare(standby, Fence(tc.spec))
				root := dial(t, endpoint, api.RootUser, "root-pw")
				user := dial(t, endpoint, login, "user-pw")

				// The applier follows as root.
				end := writeKeys(t, primary, tc.name, 10)
				f.waitStored(t, m.Revision, end)
				a := applier(b, id, root, nil)
				a.begin(ctx)
				_, err := a.pass(ctx)
				require.NoError(t, err)
				require.Equal(t, end, revisionOf(t, root))

				// The user reads, and its writes are refused: the standby's history stays the primary's.
				r, err := user.Get(ctx, tc.key)
				require.NoError(t, err)
				require.Len(t, r.Kvs, 1)
				_, err = user.Put(ctx, tc.key, "a write on the standby")
				require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
				_, err = user.Delete(ctx, tc.key)
				require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
				require.Equal(t, end, revisionOf(t, root))
				requireSame(t, primary, root)

				// Promoted: the fence lifted, the user writes (without spec.auth, auth is off again).
				declare(root, Lift(tc.spec))
				writer := user
				if tc.spec == nil {
					writer = dial(t, endpoint, "", "")
				}
				w, err := writer.Put(ctx, tc.key, "promoted")
				require.NoError(t, err)
				require.Equal(t, end+1, w.Header.Revision)
			})
		}
	})
}
