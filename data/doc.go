// Package data provides datasets and the loaders that feed them to a
// training loop in shuffled batches: in-memory tensors, the handwritten
// digits embedded in the module, MNIST-family IDX files, character-level
// text, and token and image files far larger than memory, read through a
// memory map, with resumable streams, augmentation and (in package
// data/bpe) GPT-2's byte-level BPE tokenizer.
//
// # A first training loop
//
// Everything a first program needs ships inside the module, so this runs
// offline on a fresh machine:
//
//	key := tensor.NewKey(0)
//	splitKey, loaderKey := key.Split2()
//	train, test := data.DigitsSplit(splitKey, 0.2)   // 1438 / 359 examples
//	train, test, _ = data.Standardize(train, test)   // statistics of train only
//
//	loader := &data.Loader{Dataset: train, BatchSize: 64, Shuffle: true, Key: loaderKey, Prefetch: 2}
//	for epoch := range 20 {
//		for b, err := range loader.Epoch(epoch) {
//			if err != nil {
//				return err
//			}
//			// b.X is f32[64,64], b.Y is i32[64]: compute the loss, step ...
//		}
//	}
//
// # Datasets
//
// A Dataset has a length and gathers a Batch of examples by their indices.
// A Batch holds inputs X and targets Y, batch-first, plus the Indices it came
// from; it is a pytree whose leaves are X and Y. Implementations gather whole
// rows at once (one tensor.Take per tensor for InMemory) rather than building
// tensors example by example.
//
//   - InMemory (FromTensors) holds features f32[N,...] and labels i32[N].
//     Split shuffles with a key and cuts a test fraction off; SplitAt cuts
//     without shuffling; Subset, Flatten and ClassCounts do what they say.
//   - Digits is scikit-learn's load_digits: 1,797 8x8 images of handwritten
//     digits from the UCI "Optical Recognition of Handwritten Digits" set,
//     features f32[1797,64] in [0,1] and labels i32[1797]; DigitsSplit
//     splits it reproducibly by a key. The data (57 kB compressed) is
//     embedded with go:embed; it is CC BY 4.0, see digits.LICENSE.txt.
//   - LoadFashionMNIST and LoadMNIST read the standard four IDX files from a
//     directory (FashionMNISTDir is where Debian's dataset-fashion-mnist
//     package puts them); LoadIDX reads any image/label pair of IDX files.
//   - Text serves fixed-length windows of token ids for next-token models;
//     Vocab builds a character vocabulary and encodes and decodes text.
//
// # Scaling features
//
// Statistics for standardisation (StandardScaler: zero mean, unit variance
// per feature) and min-max normalisation (MinMaxScaler: [0,1] per feature)
// are fitted on the training split only and then applied to every split, so
// nothing about the test data leaks into training. Standardize and
// Normalize do both steps for a train/test pair and return the scaler for
// later inputs.
//
// # The Loader
//
// A Loader's fields say how to iterate: BatchSize, Shuffle with a base Key,
// DropLast for a partial last batch, Prefetch, Place and Progress. Epoch(e)
// is a range-over-func iterator yielding (Batch, error).
//
// With Shuffle, epoch e visits the examples in the order
// tensor.Permutation(tensor.FoldIn(Key, e), n), which is JAX's
// jax.random.permutation(jax.random.fold_in(key, e), n): reproducible,
// different for every epoch, and independent of Prefetch. Every example
// appears exactly once per epoch; with DropLast the examples of the partial
// last batch are skipped for that epoch (a different set each epoch).
//
// With Prefetch = k > 0 a goroutine gathers and places up to k batches ahead
// of the consumer. It is stopped and waited for when the epoch ends, when the
// range loop is left early, and on the first error: no goroutine outlives the
// loop.
//
// Place is a hook applied to each batch before it is handed out, for example
// to put it on a mesh of devices, split along the batch dimension:
//
//	loader.Place = func(b data.Batch) (data.Batch, error) {
//		return shard.FilterShard(b, mesh, shard.P("dp")), nil
//	}
//
// An error from the dataset or from Place is yielded once, naming the epoch
// and batch, and ends the epoch. A panic in either (a programmer error) is
// re-raised on the consumer's goroutine, whatever Prefetch is.
//
// # Token files
//
// A token file holds token ids as little-endian uint8, uint16 or uint32
// after a 32-byte header naming the integer type, the vocabulary size and
// the token count (the layout is in tokenfile.go); OpenRawTokens reads a
// headerless file of ids too, such as nanoGPT's train.bin. OpenTokens maps
// the file into memory (on systems without mmap it reads with ReadAt
// instead): opening costs no memory for the tokens, and a read touches
// only its pages, so a file of many gigabytes serves as a dataset in a few
// megabytes of resident memory.
//
// TokenWindows (OpenTokenWindows) takes one or more token files (shards)
// as one dataset of fixed-length windows, input X i32[B,window] and
// next-token target Y, like Text does for ids in memory; stride = window
// gives disjoint windows, stride 1 every offset. WriteTokens tokenises a
// text stream into a token file in bounded memory with any Tokenizer (a
// character Vocab, or bpe.Tokenizer), cutting the text only where the
// tokens do not change; CreateTokens writes ids directly. Files are written
// under a temporary name and renamed when complete.
//
// ImageFile (OpenImages, written by CreateImages) does the same for
// labelled uint8 or uint16 images N×H×W×C, read as X f32[B,H,W,C] in [0,1]
// and Y i32[B].
//
// Files from the outside world are not trusted: a file that is not a
// regular file (a directory, a FIFO, which is refused without blocking),
// a wrong magic number or version, a size other than the header declares
// (truncated, trailing bytes, or a huge declared count), a token id at or
// above the vocabulary or a label beyond the classes (found as they are
// read: a file is never scanned whole), even a file truncated by another
// program while mapped, each give an error (a *FileError) naming the file
// and, where it applies, the byte offset, wrapping ErrNotRegular,
// ErrBadMagic, ErrUnsupportedType, ErrTruncated, ErrTrailingData,
// ErrTooLarge, ErrTokenRange or ErrLabelRange. Nothing is allocated from
// a header's claims.
//
// # Streams
//
// A Loader's epoch order is an array of its dataset's indices; for a
// dataset of billions of windows that array alone would not fit. A Stream
// reads any dataset as an endless sequence of batches numbered by
// position: batch p is step p mod NumBatches of epoch p div NumBatches,
// shuffled by a Permutation of Key and the epoch, computed one index at a
// time (a keyed Feistel network with cycle walking, like Grain's
// index_shuffle). A batch depends on nothing but the Stream's fields and
// its position, so a run saves Reader.Position with its checkpoint (as the
// step counter checkpoint's example saves) and Open(ctx, position) resumes
// mid-epoch bit-exact, with another Prefetch, on another mesh (Sharding:
// each process reads the rows of its own devices) or with another number
// of processes (Share: each reads its contiguous part of every batch).
//
// A Reader prefetches with a bounded queue of Prefetch batches, on a
// goroutine that stops when Close is called or its context is done; Close
// waits for it. Errors name the batch's position, epoch and step, and end
// the Reader; panics are re-raised by Next.
//
// # Augmentation
//
// Loader.Augment and Stream.Augment transform the examples of each batch
// as they are gathered: RandomCrop (zero padding, then a random window),
// HorizontalFlip and NormalizeChannels for images f32[B,H,W,C], chained by
// Augmentations. Example i of epoch e is augmented with ExampleKey(Key, e,
// i), so augmented batches are reproducible and do not depend on batch
// size, Prefetch, the mesh or the number of processes.
//
// # Tokenizers
//
// Tokenizer is what WriteTokens needs of a tokenizer: Vocab numbers the
// characters of a text; package data/bpe is GPT-2's byte-level BPE, which
// loads GPT-2's own vocabulary or trains one of any size from a corpus.
//
// # Progress
//
// NewProgress draws a progress bar (with rate and time left) on a writer
// that is a terminal, and draws nothing otherwise, so a program's logs stay
// clean when redirected to a file. Setting Loader.Progress shows a bar of
// each epoch's batches. Everything that writes progress takes an io.Writer.
//
// # IDX files
//
// ReadIDX and ReadIDXFile read the IDX format of MNIST (gzipped or not,
// told apart by the first bytes) into an int32 or float32 tensor; WriteIDX
// writes one. A corrupt file is never a panic: every error is an *IDXError
// naming the file and wrapping one of ErrBadMagic, ErrUnsupportedType,
// ErrDims, ErrTruncated, ErrTrailingData, ErrTooLarge, ErrCountMismatch or
// ErrLabelRange, and a header cannot make the reader allocate more than the
// data that actually follows it (nor more than MaxIDXElements).
package data
