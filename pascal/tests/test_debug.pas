{ The cautious build from Pascal (-dSPRY_DEBUG): a block overrun by one byte
  and one leaked block must be reported, naming the procedure that
  allocated them; the program goes on. pascal.sh checks the report. }
program test_debug;
uses spry;

procedure Overrun;
var p: PByte;
begin
  GetMem(p, 24);
  p[24] := 1;            { one byte past the end }
  FreeMem(p);
end;

var leaked: Pointer;

procedure Leak;
begin
  GetMem(leaked, 40);
end;

begin
  Overrun;
  Leak;
  leaked := nil;
  writeln('test_debug: done');
end.
