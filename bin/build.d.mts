// Types of bin/build.mjs for the tests that import it.

export declare const DEFAULT_OUT: string;
export declare const SOURCE_FOLDERS: readonly string[];
export declare function sourceFiles(folders?: readonly string[]): string[];
export interface BuildState {
  /** The build matches the sources. */
  current: boolean;
  /** Otherwise the first difference found. */
  reason: string;
  /** Its entry (bin/wmrl.js) exists. */
  built: boolean;
  /** That entry's file URL. */
  entry: string;
}
export declare function buildState(out?: string): BuildState;
export declare function build(out?: string): Promise<{ modules: number; seconds: number }>;
