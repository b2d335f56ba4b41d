package sync

import (
	"fmt"
	"os"
)

func init() {
	if os.Getenv("WORLD_DEBUG") != "" {
		debugHook = func(w *world, resp *Response) {
			fmt.Printf("t=%s phase=%s msg=%q part=%d repl=%d stsGen=%d seen=%d pods=", w.now.Format("15:04:05"), resp.Status.Phase, resp.Status.Message, w.partition(), w.replicas(), w.stsGen, w.stsSeen)
			for _, i := range sortedKeys(w.pods) {
				p := w.pods[i]
				fmt.Printf("%d:%s/%v/%v ", i, tail4(p.revision), p.ready, w.down[i])
			}
			fmt.Printf(" upd=%s members=%d\n", tail4(w.updateRevision()), len(w.etcd.members))
		}
	}
}

func tail4(s string) string {
	if len(s) < 4 {
		return s
	}
	return s[len(s)-4:]
}
