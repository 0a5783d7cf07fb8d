// Package checkpoint saves and restores whole training states — model,
// optimizer state, step, data-loader position, PRNG key — as sharded,
// compressed, atomic checkpoints, and exchanges models with PyTorch and JAX
// through safetensors files.
//
// # Saving and restoring
//
// A training state is any Go value whose leaves are tensors (a pytree, see
// package pytree). Save writes its tensor leaves; Restore reads them back
// into a tree shaped like a given one:
//
//	type State struct {
//		Model  MLP
//		Opt    optim.State
//		Step   *tensor.Tensor // i32[]: scalars that must survive are tensors
//		Loader *tensor.Tensor // i32[]: the data loader's position
//		Key    *tensor.Tensor // i32[2]: checkpoint.KeyTensor(key)
//	}
//
//	err := checkpoint.Save("ckpt", step, state)
//	...
//	state, err = checkpoint.Restore("ckpt", step, state, checkpoint.AsLike())
//
// Only tensors are saved. Everything else in the tree — layer sizes,
// activation funcs, names — is structure, and comes from the like argument
// of Restore, which must have the saved paths, shapes and dtypes (its
// values are not read). So counters and keys that must survive a restart
// belong in the tree as int32 tensors: tensor.ScalarInt(int32(step)) for
// the step or a loader position, KeyTensor and TensorKey for a PRNG key.
//
// # Sharding
//
// Each distinct block of a sharded tensor is written once, by a goroutine
// of the device that holds it, in parallel with the others; replicas are
// not written again, and host tensors are written as one block. Where the
// restored leaves go is a Placement:
//
//	checkpoint.OnHost()                 // host tensors (also: nil)
//	checkpoint.AsLike()                 // where like's leaves are
//	checkpoint.OnMesh(mesh, specs)      // any mesh, any shard.SpecTree
//
// The mesh may have another shape or another number of devices than the
// one saved from: a checkpoint saved on dp=4,tp=2 restores on dp=2, on one
// device or on the host. Each device's block is assembled from the saved
// blocks that overlap it, decoding only the chunks it needs, so a sharded
// tensor is never gathered on the host. Subtree restores part of a saved
// tree (the parameters of a training state into a bare model) and Partial
// lets like hold fewer leaves (a tree filtered with pytree.Filter).
//
// # Atomicity and errors
//
// A step is written into a temporary directory inside the checkpoint
// directory, synced to disk, and renamed into place only when complete: a
// crash at any moment leaves every step saved before intact and readable,
// and the next Save removes the leftovers. Overwriting a step (Overwrite)
// swaps the directories atomically (renameat2 RENAME_EXCHANGE on Linux;
// elsewhere two renames, and if a crash falls between them the next Save
// puts the old step back). One
// process at a time may write a checkpoint directory.
//
// Restore validates everything before using it — the manifest's fields,
// the tree's paths, shapes and dtypes, each chunk's CRC-32C — and reports a
// missing, truncated or corrupted file, a manifest that does not parse, a
// mismatch with like, or a file name that would leave the step directory
// (.., absolute paths, symlinks pointing outside) as an *Error naming the
// step (and its directory), the tensor and the file, wrapping ErrCorrupt,
// ErrMismatch, ErrUnsafePath or ErrNotFound; an error found in the
// manifest names manifest.json, whichever data file the faulty entry
// points to, and a dtype or shape that differs from like's is blamed on
// manifest.json, which records it. It never panics on bad input and never
// writes. It opens nothing that is not a regular file (a FIFO named like a
// data file, or like the checkpoint directory, would block), refuses a
// manifest larger than 256 MiB from its size, and refuses a step directory
// that is a symlink (naming it as the file at fault), which Steps and
// RestoreLatest do not list either.
//
// Save publishes a step by renaming it into place and then syncs the
// checkpoint directory. If only that last sync fails, the step is in place
// and readable and Save returns nil, reporting the failure to OnUnsynced
// (by default a log/slog warning): failing would say the data is not
// there when it is.
//
// # Reduced precision
//
// StoreFloatsAs(AsBFloat16) (or AsFloat16) stores float32 leaves rounded
// to nearest even in 16 bits; the manifest records it and Restore widens
// the values back to float32 exactly. Normally distributed weights take
// 2.5 times less space than with float32 storage (BenchmarkStorageRatio).
// Keep training states that must resume bit for bit in float32.
//
// Leaves of dtype bfloat16 and float16 (a model kept in bf16, say) are
// saved as they are, 2 bytes an element in the same two planes, sharded
// or not, and restore bit for bit (NaN payloads included) on any mesh.
// A float leaf restores into a leaf of another float dtype, converted as
// tensor.Convert does (see Restore): a bf16 inference model loads from the
// float32 master weights of a training checkpoint.
//
// # Manager
//
// A Manager saves a series of steps like orbax's CheckpointManager: every
// SaveEvery steps, keeping the latest KeepLatest and the best KeepBest by a
// metric stored in each step's manifest, and, with Async, in the
// background: Save takes references to the blocks (tensors are immutable,
// so that is a snapshot) and returns; compression and writes go on while
// training continues. A background save's error is returned by the next
// Save, Wait or Close, and no goroutine outlives Close.
//
// # Metadata
//
// The tensors do not say which model they belong to: a checkpoint of a
// 4-head attention layer restores into an 8-head one of the same shapes,
// and an embedding table into a vocabulary of the same size but other
// characters. A step may therefore carry a metadata record: the program's
// own struct (the model's configuration, the vocabulary or dataset
// identity, the optimizer and schedule settings), encoded with
// encoding/json into the step's manifest under a Schema — a kind and a
// version the program sets — together with the gonox version that saved
// it (GonoxVersion). It is as atomic as the step, in a Manager's
// background saves (ManagerOptions.Metadata) and in a job of several
// processes alike.
//
//	var runSchema = checkpoint.Schema{Kind: "moe-run", Version: 1}
//
//	err := checkpoint.Save(dir, step, state, checkpoint.WithMetadata(runSchema, cfg))
//
//	var saved Config
//	info, err := checkpoint.ReadMetadata(dir, step, runSchema, &saved)
//	for _, d := range checkpoint.DiffMetadata(saved, cfg) {
//		fmt.Println(d) // "Heads: saved 4, now 8"
//	}
//
// ReadMetadata reads the record without restoring a tensor and decodes it
// strictly: a step without a record, a record of another kind or of a
// newer version, a field the program's type lacks or a value that does not
// fit is an error wrapping ErrMismatch that names the step's manifest.json
// and what differs; a record of an older version decodes, and says which
// version it is. DiffMetadata lists every setting whose saved value
// differs from the current one, with both values, and the program decides
// what each means: refuse the step for a model setting, go on with a
// warning for one that may change on resume (the number of steps, the
// mesh). CheckMetadata does the same inside Restore and RestoreLatest,
// before any tensor is read, so that a setting that changes shapes is
// reported as the setting rather than as a tensor whose shape differs.
//
// # Recovering past a corrupt step
//
// A step that a crash interrupted is never a step (see Atomicity and
// errors), but a step on disk can still be damaged afterwards: a bit
// flipped by the storage, a file cut short by a full disk, a file deleted
// by hand. By default RestoreLatest then fails, naming the step and the
// file: falling back on its own would hide the damage and silently redo
// the training since an older step. Given SkipCorrupt, it falls back: it
// tries the newest step, and if that fails because the step is damaged
// (ErrCorrupt, ErrUnsafePath, ErrNotFound) reports the step with its
// error and tries the one before, and so on, returning the step it
// restored. A step that does not fit the tree or the program's
// CheckMetadata is not skipped: an older step of the same directory would
// not fit better.
//
//	state, step, err := checkpoint.RestoreLatest(dir, like, checkpoint.AsLike(),
//		checkpoint.SkipCorrupt(func(step int, err error) {
//			log.Printf("step %d is damaged, trying the one before: %v", step, err)
//		}))
//
// Steps are verified as they restore (every chunk a restore reads is
// checked against its CRC-32C), so a step restored is a step that is
// whole as far as the tree restored reads it. A damaged step is left on
// disk for inspection; a Manager prunes it like any other.
//
// # On-disk layout
//
//	ckpt/                          the checkpoint directory
//	  00000100/                    step 100 (8 digits, more for larger steps)
//	    manifest.json              what is where (below)
//	    d0000.bin ... d0007.bin    blocks written by devices 0..7 (pool IDs)
//	    h0000.bin, h0001.bin       host tensors, spread over GOMAXPROCS writers
//	  00000200/
//	  .tmp-00000300-123456/        a save in progress, or killed (not a step)
//
// A data file is a concatenation of zstd frames (RFC 8878). Each block of
// a tensor is stored as consecutive chunks, one per chunk_bytes raw bytes
// of the block (1 MiB; the last chunk shorter). A chunk holds the block's
// elements in row-major order, byte-shuffled: with n elements of 4 bytes,
// the n least significant bytes (little-endian byte 0) first, then the n
// bytes 1, 2 and 3; bool elements (one byte, 0 or 1) are not shuffled. Each
// byte plane is one zstd frame (bool chunks: one frame), so a chunk
// decodes with one call into the shuffled bytes. Float32 planes are
// entropy-coded only — zstd frames of Huffman-coded literal blocks, raw or
// RLE blocks, built around klauspost/compress's huff0 — because sign and
// exponent bytes are a few distinct values that zstd's match finder is
// slow on and that Huffman coding compresses better; int32 and bool planes
// go through zstd's encoder (SpeedFastest). Any zstd decoder, the zstd
// command included, decompresses a chunk. The manifest is JSON:
//
//	{
//	 "format": "gonox-checkpoint",
//	 "version": 1,                             2 if a tensor has "storage" or a 16-bit dtype,
//	                                           3 if there is a metadata record
//	 "step": 100,
//	 "time": "2026-11-22T13:00:00Z",
//	 "metrics": {"loss": 0.25},               (optional)
//	 "codec": "shuffle+zstd",
//	 "chunk_bytes": 1048576,
//	 "metadata": {                             (optional) WithMetadata's record
//	  "kind": "moe-run",                       the Schema
//	  "version": 1,
//	  "gonox": "v0.4.0",                       GonoxVersion of the program that saved
//	  "value": {"Heads": 4, ...}               the program's record, a JSON object
//	 },
//	 "tensors": [
//	  {
//	   "path": "Model.Layers[0].W",            the pytree path of the leaf
//	   "dtype": "float32",                     float32, int32, bool, bfloat16 or float16
//	                                           (2-byte elements, shuffled into 2 planes)
//	   "storage": "bfloat16",                  (optional, float32 only) stored as
//	                                           bfloat16 or float16: 2-byte elements,
//	                                           shuffled into 2 planes
//	   "shape": [1024, 4096],                  the global shape
//	   "mesh": {"axes": ["dp", "tp"], "shape": [4, 2], "devices": [0, 1, ...]},
//	   "spec": [["dp"], ["tp"]],               axes of each dimension ([]: whole)
//	   "shards": [                             each distinct block once
//	    {
//	     "offset": [0, 0],                     global index of its first element
//	     "shape": [256, 2048],                 the block's shape
//	     "device": 0,                          who wrote it (-1: host)
//	     "file": "d0000.bin",
//	     "pos": 0,                             byte position of its first chunk
//	     "size": 1780342,                      compressed bytes, all chunks
//	     "raw": 2097152,                       raw bytes
//	     "chunks": [{"size": 890171, "crc32c": 3735928559}, ...]   one per chunk
//	    }, ...
//	   ]
//	  },
//	  {"path": "Step", "dtype": "int32", "shape": [], "shards": [...]}   host: no mesh
//	 ]
//	}
//
// Checksums are CRC-32C (Castagnoli) of each chunk's stored bytes: hash/crc32
// computes it with the SSE4.2 or ARMv8 CRC instructions at many GB/s,
// needs no dependency, and catches the flipped bits and torn writes that
// storage produces; an adversary who can rewrite the manifest can rewrite
// its checksums too, which is why the parser also bounds every size and
// refuses unsafe file names, and the decoder checks every decoded length.
//
// # Safetensors
//
// ExportSafetensors writes a tree (sharded leaves gathered one at a time)
// to a .safetensors file that safetensors.torch.load_file,
// safetensors.flax.load_file and safetensors.numpy.load_file read, tensors
// named by their tree paths ("Layers[0].W"; leaves of a root
// map[string]*tensor.Tensor by their bare keys, as in a PyTorch state dict).
// ImportSafetensors reads one into a tree given like, checking the header
// at least as strictly as the reference implementation: its length
// against the file, a field twice in an entry, offsets that overlap, leave
// holes or run past the end, and dtypes and shapes against the sizes and
// against like; a tensor name or a __metadata__ key given twice, of which
// the reference keeps the last, is refused too. Like Restore, it opens
// nothing that is not a regular file (following symlinks, which download
// caches use), so a FIFO at the path fails instead of blocking.
//
// Float32 leaves read F32, BF16 and F16 tensors (widened exactly) and F64
// ones (rounded to nearest even, overflowing to ±Inf); ExportFloatsAs
// writes them as BF16, F16 or F64. Bfloat16 and float16 leaves are written
// as BF16 and F16 and read BF16 and F16 tensors bit for bit, F32 ones
// rounded to nearest even, and the other 16-bit format through float32
// (see ImportSafetensors). MapNames reads files whose names are
// not tree paths, such as a PyTorch state_dict: Rename rewrites names by
// regular expression, Transpose turns PyTorch's [out, in] nn.Linear
// weights into gonox's [in, out], SplitRows divides a stacked tensor
// (torch.nn.MultiheadAttention's in_proj_weight) into parts, TorchMLP has the
// rules for an nn.Sequential of Linear layers (see its example), TorchRNN
// those for a torch.nn.LSTM, GRU or RNN, and TorchTransformer those for
// torch.nn.Transformer and its encoder and decoder layers and stacks.
package checkpoint
