package diagnose

import "testing"

// The pods of a workload fixed one delete each get one delete of them all;
// another code, another namespace or a lone pod keep their own.
func TestMergePodDeletes(t *testing.T) {
	const held = "   # its StatefulSet queue re-creates it, whatever its update strategy (OnDelete, a partition)"
	d := func(code, fix string) *Diagnosis { return &Diagnosis{First: CheckInjection, Code: code, Fix: fix} }
	ds := []*Diagnosis{
		d("KM-INJ-002", "kubectl delete pod queue-0 -n shop"+held),
		d("KM-INJ-002", "kubectl delete pod queue-1 -n shop"+held+"\nsecond line"),
		d("KM-START-005", "kubectl delete pod queue-2 -n shop"+held),
		d("KM-INJ-002", "kubectl rollout restart deployment/web -n shop"),
	}
	MergePodDeletes(ds)
	want := "kubectl delete pod queue-0 queue-1 -n shop   # its StatefulSet queue re-creates them, whatever its update strategy (OnDelete, a partition)"
	if ds[0].Fix != want || ds[1].Fix != want+"\nsecond line" {
		t.Errorf("merged:\n%s\n%s", ds[0].Fix, ds[1].Fix)
	}
	if ds[2].Fix != "kubectl delete pod queue-2 -n shop"+held || ds[3].Fix != "kubectl rollout restart deployment/web -n shop" {
		t.Errorf("kept:\n%s\n%s", ds[2].Fix, ds[3].Fix)
	}
}
