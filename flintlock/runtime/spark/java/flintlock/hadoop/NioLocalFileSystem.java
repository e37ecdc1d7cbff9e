package flintlock.hadoop;

import org.apache.hadoop.fs.LocalFileSystem;

/** Hadoop's LocalFileSystem (checksummed) over NioRawLocalFileSystem: Spark's fs.file.impl. */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new NioRawLocalFileSystem());
  }
}
