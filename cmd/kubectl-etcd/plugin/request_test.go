package plugin

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcdhook/etcdhook/api"
)

// demoCluster is the EtcdCluster prod/demo with this spec and no status.
func demoCluster(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.APIVersion, "kind": api.Kind,
		"metadata": map[string]any{"name": "demo", "namespace": "prod"},
		"spec":     spec,
	}}
}

// playHook plays the hook's answers to a request on prod/demo: every read of the EtcdCluster returns
// a copy of the stored object, which answer may change first; answer gets the read's number (from 1).
func playHook(t *testing.T, dyn *dynamicfake.FakeDynamicClient, answer func(read int, cur *unstructured.Unstructured)) {
	reads := 0
	dyn.PrependReactor("get", "etcdclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reads++
		obj, err := dyn.Tracker().Get(GVR, "prod", "demo")
		require.NoError(t, err)
		cur := obj.(*unstructured.Unstructured).DeepCopy()
		answer(reads, cur)
		return true, cur, nil
	})
}

// backup sets a new etcd.io/backup-now token and waits for status.backup.onDemand of that token: the
// hook's answer is played by a reactor that fills the status from the third read.
func TestBackupAnnotatesAndWaits(t *testing.T) {
	for _, tc := range []struct {
		name, phase, want string
		code              int
	}{
		{"succeeded", "Succeeded", "succeeded: s3://b/prod/demo/x-r7.db (revision 7, 4096 bytes)", 0},
		{"failed", "Failed", "backup \"t-1\" failed (Job demo-backup-abc): bucket missing", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := newDynamic(demoCluster(map[string]any{"backup": map[string]any{"destination": "s3://b"}}))
			playHook(t, dyn, func(read int, cur *unstructured.Unstructured) {
				if read < 3 {
					return
				}
				require.Equal(t, "t-1", cur.GetAnnotations()[api.AnnBackupNow], "the token is set before the wait")
				_ = unstructured.SetNestedMap(cur.Object, map[string]any{
					"lastSnapshot": "s3://b/prod/demo/x-r7.db", "revision": int64(7), "size": int64(4096), "lastFailure": "bucket missing",
					"onDemand": map[string]any{"token": "t-1", "job": "demo-backup-abc", "phase": tc.phase},
				}, "status", "backup")
			})
			te := newTestEnv(dyn, fake.NewClientset())
			code := te.run("backup", "demo", "--id", "t-1")
			require.Equal(t, tc.code, code, te.err.String())
			require.Contains(t, te.out.String()+te.err.String(), tc.want)
		})
	}
	t.Run("no spec.backup", func(t *testing.T) {
		te := newTestEnv(newDynamic(demoCluster(map[string]any{})), fake.NewClientset())
		require.Equal(t, 1, te.run("backup", "demo"))
		require.Contains(t, te.err.String(), "has no spec.backup")
	})
}

// defrag sets a new etcd.io/defrag-now token, prints the pass's progress from the Defragmenting
// condition, and ends when the condition is gone; the hook is played by a reactor.
func TestDefragAnnotatesAndWaits(t *testing.T) {
	dyn := newDynamic(demoCluster(map[string]any{}))
	playHook(t, dyn, func(read int, cur *unstructured.Unstructured) {
		if read < 3 || read >= 5 {
			return
		}
		require.Equal(t, "t-1", cur.GetAnnotations()[api.AnnDefragNow], "the token is set before the wait")
		_ = unstructured.SetNestedSlice(cur.Object, []any{map[string]any{
			"type": api.CondDefragmenting, "status": "True", "reason": "MemberDefragmenting", "lastTransitionTime": "2026-01-01T12:00:00Z",
			"message": fmt.Sprintf("pass now:t-1: %d done, %d to go; demo-%d defragments (one member at a time, the leader last)", read-3, 6-read, read-2),
		}}, "status", "conditions")
	})
	te := newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 0, te.run("defrag", "demo", "--id", "t-1"), te.err.String())
	out := te.out.String()
	require.Contains(t, out, `defragmentation "t-1" of prod/demo requested`)
	require.Contains(t, out, "pass now:t-1: 0 done, 3 to go; demo-1 defragments")
	require.Contains(t, out, "pass now:t-1: 1 done, 2 to go; demo-2 defragments")
	require.Contains(t, out, "done: every member of prod/demo defragmented")
}

// renew and rotate-ca set their annotation to a value never used before and follow their part of
// status.tls (written here by a reactor, as the hook would) until the request is served; the same
// value again is refused.
func TestTLSRequestsAnnotateAndWait(t *testing.T) {
	phases := []string{api.CARotationAddingCA, api.CARotationReissuing, api.CARotationDroppingCA, api.CARotationDone}
	for _, tc := range []struct {
		cmd, id, annotation string
		// status is what the hook writes at the read-th read (from the second).
		status func(read int) (map[string]any, []string)
		want   []string
		// after runs once the request is served, on the same cluster.
		after func(t *testing.T, dyn *dynamicfake.FakeDynamicClient)
	}{{
		// renew follows status.tls.renewal until every member serves a renewed certificate.
		cmd: "renew", id: "r-1", annotation: api.AnnRenewCertificates,
		status: func(read int) (map[string]any, []string) {
			return map[string]any{"request": "r-1", "members": int64(3), "renewed": min(int64(read-2), 3)}, []string{"status", "tls", "renewal"}
		},
		want: []string{
			`renewal "r-1" of the certificates of prod/demo requested (member keys are kept)`,
			"0 of 3 members serve a renewed certificate",
			"2 of 3 members serve a renewed certificate",
			"done: every member of prod/demo serves a renewed certificate",
		},
	}, {
		// rotate-ca follows status.tls.caRotation until Done.
		cmd: "rotate-ca", id: "ca-1", annotation: api.AnnRotateCA,
		status: func(read int) (map[string]any, []string) {
			phase := phases[min(read-2, len(phases)-1)]
			return map[string]any{"request": "ca-1", "phase": phase, "members": int64(3), "trusting": int64(3), "issued": int64(1), "restarting": "demo-1"}, []string{"status", "tls", "caRotation"}
		},
		want: []string{
			`CA rotation "ca-1" of prod/demo requested`,
			"Reissuing: 3 of 3 members trust the new CA, 1 serve its certificate; restarting demo-1",
			"done: every member of prod/demo trusts and serves the new CA alone",
		},
		after: func(t *testing.T, dyn *dynamicfake.FakeDynamicClient) {
			te := newTestEnv(dyn, fake.NewClientset())
			require.Equal(t, 0, te.run("status", "demo"))
			require.Contains(t, squeeze(te.out.String()), ` CA rotation "ca-1": Done: 3 of 3 members trust the new CA, 1 serve its certificate; restarting demo-1`)
		},
	}} {
		t.Run(tc.cmd, func(t *testing.T) {
			dyn := newDynamic(demoCluster(map[string]any{}))
			playHook(t, dyn, func(read int, cur *unstructured.Unstructured) {
				if read < 2 {
					return
				}
				require.Equal(t, tc.id, cur.GetAnnotations()[tc.annotation], "the value is set before the wait")
				status, path := tc.status(read)
				_ = unstructured.SetNestedMap(cur.Object, status, path...)
			})
			te := newTestEnv(dyn, fake.NewClientset())
			require.Equal(t, 0, te.run(tc.cmd, "demo", "--id", tc.id), te.err.String())
			out := te.out.String()
			for _, want := range tc.want {
				require.Contains(t, out, want)
			}
			if tc.after != nil {
				tc.after(t, dyn)
			}

			te = newTestEnv(dyn, fake.NewClientset())
			require.NotEqual(t, 0, te.run(tc.cmd, "demo", "--id", tc.id))
			require.Contains(t, te.err.String(), "use a value never used before")
		})
	}
}
