package plugin

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcdhook/etcdhook/api"
)

// The request commands as the documents show them (README, tls.md, operations.md), without --id: the
// value written is the time of the request, in seconds for backup and defrag (one Job or pass per
// value) and in nanoseconds for the others (their value must never repeat, and two asked within a
// second must differ); each waits until the hook, played by a reactor, has served that value.
func TestRequestsWithoutID(t *testing.T) {
	secs, nanos := strconv.FormatInt(now.Unix(), 10), strconv.FormatInt(now.UnixNano(), 10)
	for _, tc := range []struct {
		args              []string
		annotation, value string
		// serve writes the hook's answer to the request carrying value.
		serve func(cur *unstructured.Unstructured, value string)
		done  string
	}{{
		args: []string{"backup", "demo"}, annotation: api.AnnBackupNow, value: secs,
		serve: func(cur *unstructured.Unstructured, v string) {
			_ = unstructured.SetNestedMap(cur.Object, map[string]any{"lastSnapshot": "s3://b/prod/demo/x-r7.db", "revision": int64(7), "size": int64(4096),
				"onDemand": map[string]any{"token": v, "job": "demo-backup-abc", "phase": "Succeeded"}}, "status", "backup")
		},
		done: "succeeded: s3://b/prod/demo/x-r7.db (revision 7, 4096 bytes)",
	}, {
		args: []string{"defrag", "demo"}, annotation: api.AnnDefragNow, value: secs,
		serve: func(cur *unstructured.Unstructured, _ string) {
			_ = unstructured.SetNestedSlice(cur.Object, []any{map[string]any{"name": "demo-0", "lastDefragTime": "2026-01-01T12:00:01Z"}}, "status", "members")
		},
		done: "done: every member of prod/demo defragmented",
	}, {
		args: []string{"renew", "demo"}, annotation: api.AnnRenewCertificates, value: nanos,
		serve: func(cur *unstructured.Unstructured, v string) {
			_ = unstructured.SetNestedMap(cur.Object, map[string]any{"request": v, "members": int64(3), "renewed": int64(3)}, "status", "tls", "renewal")
		},
		done: "done: every member of prod/demo serves a renewed certificate",
	}, {
		args: []string{"rotate-ca", "demo"}, annotation: api.AnnRotateCA, value: nanos,
		serve: func(cur *unstructured.Unstructured, v string) {
			_ = unstructured.SetNestedMap(cur.Object, map[string]any{"request": v, "phase": api.CARotationDone, "members": int64(3), "trusting": int64(3), "issued": int64(3)},
				"status", "tls", "caRotation")
		},
		done: "done: every member of prod/demo trusts and serves the new CA alone",
	}, {
		args: []string{"rotate-user", "demo", "orders-svc"}, annotation: api.AnnRotateUser, value: "orders-svc=" + nanos,
		serve: func(cur *unstructured.Unstructured, _ string) { withAuthStatus(cur, "2027-02-01T00:00:00Z") },
		done:  "done: user orders-svc's Secret holds a new certificate (expires 2027-02-01T00:00:00Z)",
	}} {
		t.Run(tc.args[0], func(t *testing.T) {
			u := demoCluster(map[string]any{"backup": map[string]any{"destination": "s3://b"}})
			withAuthStatus(u, "2027-01-01T00:00:00Z")
			dyn := newDynamic(u)
			playHook(t, dyn, func(_ int, cur *unstructured.Unstructured) {
				v, asked := cur.GetAnnotations()[tc.annotation]
				if !asked {
					return
				}
				require.Equal(t, tc.value, v, "the value is the time of the request")
				tc.serve(cur, v)
			})
			te := newTestEnv(dyn, fake.NewClientset())
			require.Equal(t, 0, te.run(tc.args...), te.err.String())
			require.Contains(t, te.out.String(), tc.done)
		})
	}
}
