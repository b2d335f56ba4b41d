package plugin

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcdhook/etcdhook/api"
)

// backups runs backup-list in the writer pod with the destination flags that pod runs with (not others:
// the retention and lease flags are the writer's own), and prints each snapshot with its chain's span.
func TestBackupsListsFromTheWriterPod(t *testing.T) {
	writer := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-backup-writer-0", Namespace: "prod"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcdhook", Command: []string{api.HookBinary, "backup-follow",
			"--cluster=demo", "--namespace=prod", "--cluster-uid=u1", "--destination=s3://b/p?endpoint=http://minio:9000",
			"--lease=demo-backup", "--keep-last=7", "--credentials-dir=/var/run/etcdhook/backup-credentials"}}}}}
	te := newTestEnv(newDynamic(loadFixture(t, "scaling.yaml").cluster()), fake.NewClientset(writer))
	t0 := time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC)
	list := []api.Restorable{
		{Snapshot: "s3://b/p/prod/demo/20260101T110000Z-r4242.db?endpoint=http://minio:9000", Time: t0, Revision: 4242, EtcdClusterID: "c1",
			Chain: &api.RestorableChain{Chunks: 12, First: 4243, Last: 9876, FirstTime: t0.Add(time.Second), LastTime: t0.Add(42 * time.Minute)}},
		{Snapshot: "s3://b/p/prod/demo/20260101T100000Z-r1000.db?endpoint=http://minio:9000", Time: t0.Add(-time.Hour), Revision: 1000, EtcdClusterID: "c1",
			Chain: &api.RestorableChain{Chunks: 3, First: 1001, Last: 2000, FirstTime: t0.Add(-time.Hour), LastTime: t0.Add(-50 * time.Minute),
				Problem: "gap: chunk x starts at revision 2101 where 2001 was due"}},
	}
	te.clients.Exec = func(ctx context.Context, ns, pod, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
		te.execs = append(te.execs, execCall{pod: pod, container: container, cmd: cmd})
		return json.NewEncoder(stdout).Encode(list)
	}
	require.Equal(t, 0, te.run("backups", "demo"), te.err.String())
	require.Len(t, te.execs, 1)
	require.Equal(t, "demo-backup-writer-0", te.execs[0].pod)
	require.Equal(t, []string{api.HookBinary, "backup-list", "--cluster=demo", "--namespace=prod", "--destination=s3://b/p?endpoint=http://minio:9000",
		"--credentials-dir=/var/run/etcdhook/backup-credentials"}, te.execs[0].cmd)
	out := squeeze(te.out.String())
	require.Contains(t, out, "20260101T110000Z-r4242.db 2026-01-01T11:00:00Z 4242 - 9876 2026-01-01T11:00:00Z - 2026-01-01T11:42:00Z 12 chunks\n")
	require.Contains(t, out, "1000 - 2000")
	require.Contains(t, out, "not past this: gap")
}

// Without a writer there is nothing in the cluster that reaches the store: said, not guessed.
func TestBackupsWithoutAWriter(t *testing.T) {
	te := newTestEnv(newDynamic(loadFixture(t, "scaling.yaml").cluster()), fake.NewClientset())
	require.Equal(t, 1, te.run("backups", "demo"))
	require.Contains(t, te.err.String(), "no continuous backup writer")
	require.Empty(t, te.execs)
}

// --to-time and --to-revision become spec.restore's point; both, a bad time, or --in-place are refused.
func TestRestoreToAPoint(t *testing.T) {
	te := newTestEnv(newDynamic(), fake.NewClientset())
	require.Equal(t, 0, te.run("restore", "copy", "--from", "s3://b/p/latest", "--to-time", "2026-01-01T11:42:00Z", "--wait=false"), te.err.String())
	obj, err := te.clients.Dynamic.Resource(GVR).Namespace("prod").Get(context.Background(), "copy", metav1.GetOptions{})
	require.NoError(t, err)
	got, _, _ := unstructured.NestedString(obj.Object, "spec", "restore", "toTime")
	require.Equal(t, "2026-01-01T11:42:00Z", got)
	for _, args := range [][]string{
		{"restore", "x", "--from", "s3://b/p/latest", "--to-time", "2026-01-01T11:42:00Z", "--to-revision", "5"},
		{"restore", "x", "--from", "s3://b/p/latest", "--to-time", "yesterday"},
		{"restore", "x", "--from", "s3://b/p/latest", "--to-revision", "-5"},
		{"restore", "x", "--from", "s3://b/p/latest", "--dry-run"},
	} {
		te := newTestEnv(newDynamic(), fake.NewClientset())
		require.Equal(t, 2, te.run(args...), "%v", args)
	}
}
