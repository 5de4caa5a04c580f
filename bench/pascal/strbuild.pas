{ Seed 001 (Primoz Gabrijelcic's test of Eric Grange's string builders): THREADS
  threads at once each build REPEAT strings of PIECES pieces
  (#13#10'Eating apple #' + the number), with one of four builders:
    trivial   s := s + piece (the RTL's SetLength grows the string)
    builder   TStringBuilder
    blocks    a write-only block stream: 4 KiB blocks, joined at the end
    writer    a text writer with a 64 KiB buffer, flushed into a TMemoryStream
  strbuild BUILDER THREADS PIECES REPEAT }
program strbuild;
{$mode objfpc}{$H+}
uses {$ifdef USE_SPRY}spry,{$endif} {$ifdef USE_CMEM}cmem,{$endif}
  cthreads, Classes, SysUtils, Linux, UnixType;
{$I common.inc}

const
  Piece = #13#10'Eating apple #';

type
  TBuilderKind = (bkTrivial, bkBuilder, bkBlocks, bkWriter);

  PBlock = ^TBlock;
  TBlock = record
    Next: PBlock;
    Used: Integer;
    Data: array[0..4095] of Char;
  end;

  { DWS's TWriteOnlyBlockStream, reduced: append-only 4 KiB blocks }
  TBlockWriter = class
    First, Last: PBlock;
    Total: Integer;
    procedure Write(const s: string);
    function ToString: string; override;
    destructor Destroy; override;
  end;

  { mORMot's TTextWriter, reduced: one preallocated buffer flushed to a stream }
  TTextWriter = class
    Buf: PChar;
    Pos, Size: Integer;
    Stream: TMemoryStream;
    constructor Create(bufsize: Integer);
    procedure Flush;
    procedure Add(const s: string);
    function Text: string;
    destructor Destroy; override;
  end;

  TWorker = class(TThread)
    Kind: TBuilderKind;
    Pieces, Repeats: Integer;
    Total: Int64;
    procedure Execute; override;
  end;

procedure TBlockWriter.Write(const s: string);
var n, k, off: Integer;
    b: PBlock;
begin
  n := Length(s); off := 1;
  while n > 0 do
    begin
      if (Last = nil) or (Last^.Used = SizeOf(Last^.Data)) then
        begin
          New(b); b^.Next := nil; b^.Used := 0;
          if Last = nil then First := b else Last^.Next := b;
          Last := b;
        end;
      k := SizeOf(Last^.Data) - Last^.Used;
      if k > n then k := n;
      Move(s[off], Last^.Data[Last^.Used], k);
      Inc(Last^.Used, k); Inc(off, k); Dec(n, k); Inc(Total, k);
    end;
end;

function TBlockWriter.ToString: string;
var b: PBlock; p: Integer;
begin
  SetLength(Result, Total);
  p := 1; b := First;
  while b <> nil do
    begin
      Move(b^.Data[0], Result[p], b^.Used);
      Inc(p, b^.Used);
      b := b^.Next;
    end;
end;

destructor TBlockWriter.Destroy;
var b, n: PBlock;
begin
  b := First;
  while b <> nil do begin n := b^.Next; Dispose(b); b := n; end;
  inherited;
end;

constructor TTextWriter.Create(bufsize: Integer);
begin
  Size := bufsize;
  Buf := GetMem(Size);
  Stream := TMemoryStream.Create;
end;

procedure TTextWriter.Flush;
begin
  Stream.WriteBuffer(Buf^, Pos);
  Pos := 0;
end;

procedure TTextWriter.Add(const s: string);
begin
  if Pos + Length(s) > Size then Flush;
  Move(s[1], Buf[Pos], Length(s));
  Inc(Pos, Length(s));
end;

function TTextWriter.Text: string;
begin
  Flush;
  SetLength(Result, Stream.Size);
  Move(Stream.Memory^, Result[1], Stream.Size);
end;

destructor TTextWriter.Destroy;
begin
  FreeMem(Buf);
  Stream.Free;
  inherited;
end;

function Build(kind: TBuilderKind; pieces: Integer): string;
var
  i: Integer;
  sb: TStringBuilder;
  bw: TBlockWriter;
  tw: TTextWriter;
begin
  case kind of
    bkTrivial:
      begin
        Result := '';
        for i := 1 to pieces do
          Result := Result + Piece + IntToStr(i);
      end;
    bkBuilder:
      begin
        sb := TStringBuilder.Create;
        try
          for i := 1 to pieces do
            sb.Append(Piece).Append(i);
          Result := sb.ToString;
        finally
          sb.Free;
        end;
      end;
    bkBlocks:
      begin
        bw := TBlockWriter.Create;
        try
          for i := 1 to pieces do
            begin
              bw.Write(Piece);
              bw.Write(IntToStr(i));
            end;
          Result := bw.ToString;
        finally
          bw.Free;
        end;
      end;
    bkWriter:
      begin
        tw := TTextWriter.Create(65536);
        try
          for i := 1 to pieces do
            begin
              tw.Add(Piece);
              tw.Add(IntToStr(i));
            end;
          Result := tw.Text;
        finally
          tw.Free;
        end;
      end;
  end;
end;

procedure TWorker.Execute;
var r: Integer; s: string;
begin
  for r := 1 to Repeats do
    begin
      s := Build(Kind, Pieces);
      Inc(Total, Length(s));
    end;
  WorkerDone;
end;

const
  Names: array[TBuilderKind] of string = ('trivial', 'builder', 'blocks', 'writer');
var
  kind, k: TBuilderKind;
  threads, pieces, repeats, i: Integer;
  workers: array of TWorker;
  t0, t: Double;
  expected, total: Int64;
begin
  kind := bkTrivial;
  for k := Low(TBuilderKind) to High(TBuilderKind) do
    if ParamStr(1) = Names[k] then kind := k;
  threads := ArgInt(2, 1);
  pieces := ArgInt(3, 10000);
  repeats := ArgInt(4, 100);
  expected := Length(Build(kind, pieces));
  SetLength(workers, threads);
  for i := 0 to threads - 1 do
    begin
      workers[i] := TWorker.Create(True);
      workers[i].Kind := kind;
      workers[i].Pieces := pieces;
      workers[i].Repeats := repeats;
    end;
  WorkersStarting(threads);
  t0 := Now_s;
  for i := 0 to threads - 1 do workers[i].Start;
  AllDone;
  t := Now_s - t0;
  total := 0;
  for i := 0 to threads - 1 do
    begin
      workers[i].WaitFor;
      Inc(total, workers[i].Total);
      workers[i].Free;
    end;
  if total <> expected * repeats * threads then
    begin
      WriteLn(StdErr, 'CORRUPT: built ', total, ' characters, expected ', expected * repeats * threads);
      Halt(3);
    end;
  Report('pascal_strbuild', 'seconds=' + Secs(t) + ' builder=' + Names[kind] +
    ' threads=' + IntToStr(threads));
end.
